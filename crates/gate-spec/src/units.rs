//! Typed quantities: sizes in bytes, percentages, milliseconds. Parsing is
//! text-only (no YAML here) so the spec loader, the CLI and tests share it.

use std::fmt;

use serde::{Deserialize, Serialize};

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * 1024;
pub const GIB: u64 = 1024 * 1024 * 1024;

/// A size in bytes. Displayed in MiB with the unit printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl Bytes {
    pub fn mib(self) -> f64 {
        self.0 as f64 / MIB as f64
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = self.mib();
        if self.0 != 0 && mib < 0.1 {
            // Small figures (a DQN's few KiB of optimizer temporaries) would read 0.0 MiB.
            let kib = self.0 as f64 / KIB as f64;
            write!(f, "{kib:.*} KiB", decimals(kib))
        } else {
            // Four significant digits (one decimal at least), so a change
            // of 0.1 % stays visible: 0.4123 MiB, not 0.4 MiB.
            write!(f, "{mib:.*} MiB", decimals(mib))
        }
    }
}

/// Decimals for four significant digits of `v`, one at least.
fn decimals(v: f64) -> usize {
    if v <= 0.0 || !v.is_finite() {
        return 1;
    }
    (3 - v.log10().floor() as i64).clamp(1, 6) as usize
}

/// A signed byte difference, for deltas against a baseline.
pub fn fmt_delta_bytes(delta: i128) -> String {
    let sign = if delta < 0 { "-" } else { "+" };
    format!("{sign}{}", Bytes(delta.unsigned_abs() as u64))
}

/// A percentage such as a regression tolerance (`5%`).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Percent(pub f64);

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", trim_float(self.0))
    }
}

/// Why a quantity did not parse; the message is user-facing, the hint says the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitError {
    pub message: String,
    pub hint: String,
}

const SIZE_HINT: &str =
    "write a number and a unit: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024), e.g. `300 MB`";

/// Parses `300 MB`, `1.5GiB`, `512 B`. A bare number is refused: the unit must be explicit.
///
/// ```
/// use gate_spec::units::{parse_size, Bytes};
/// assert_eq!(parse_size("300 MB").unwrap(), Bytes(300_000_000));
/// assert_eq!(parse_size("1 GiB").unwrap(), Bytes(1 << 30));
/// assert!(parse_size("300").unwrap_err().hint.contains("KiB"));
/// ```
pub fn parse_size(text: &str) -> Result<Bytes, UnitError> {
    let t = text.trim();
    // The number ends where the unit starts; an exponent (`5e3`) is part
    // of the number: an `e` between a digit and a digit or sign. Every byte
    // before the split is ASCII, so the split is a char boundary.
    let b = t.as_bytes();
    let exponent = |i: usize| {
        i > 0
            && b[i - 1].is_ascii_digit()
            && b.get(i + 1)
                .is_some_and(|c| c.is_ascii_digit() || matches!(c, b'-' | b'+'))
    };
    let split = (0..b.len())
        .find(|&i| {
            let c = b[i];
            !(c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-' | b'+') || (matches!(c, b'e' | b'E') && exponent(i)))
        })
        .unwrap_or(b.len());
    let (num, unit) = (t[..split].trim(), t[split..].trim());
    if num.is_empty() {
        return Err(UnitError {
            message: format!("`{text}` is not a size"),
            hint: SIZE_HINT.into(),
        });
    }
    let value: f64 = num.replace('_', "").parse().map_err(|_| UnitError {
        message: format!("`{text}` is not a size"),
        hint: SIZE_HINT.into(),
    })?;
    if unit.is_empty() {
        return Err(UnitError {
            message: format!("size `{text}` has no unit"),
            hint: SIZE_HINT.into(),
        });
    }
    let scale = match SizeUnit::parse(unit) {
        Some(u) => u.scale(),
        None => {
            return Err(UnitError {
                message: format!("unknown size unit `{unit}` in `{text}`"),
                hint: SIZE_HINT.into(),
            })
        }
    };
    if !value.is_finite() || value <= 0.0 {
        return Err(UnitError {
            message: format!("size `{text}` must be greater than zero"),
            hint: "a budget or capacity of zero or less can never be met; give a positive size".into(),
        });
    }
    let bytes = value * scale as f64;
    if bytes > u64::MAX as f64 / 2.0 {
        return Err(UnitError {
            message: format!("size `{text}` is too large"),
            hint: "sizes are capped at 8 EiB".into(),
        });
    }
    if bytes.round() < 1.0 {
        // Caught here, at the spec's position, not later as a budget no run can meet.
        return Err(UnitError {
            message: format!("size `{text}` rounds to 0 bytes"),
            hint: "sizes count whole bytes: give at least `1 B`".into(),
        });
    }
    if scale == 1 && value.fract() != 0.0 {
        return Err(UnitError {
            message: format!("size `{text}` is not a whole number of bytes"),
            hint: "a size in `B` counts whole bytes; a larger unit may take a fraction (`1.5 KiB`)".into(),
        });
    }
    Ok(Bytes(bytes.round() as u64))
}

/// Parses `5%` or `12.5 %`.
pub fn parse_percent(text: &str) -> Result<Percent, UnitError> {
    let hint = "write a percentage such as `5%`";
    let t = text.trim();
    let Some(num) = t.strip_suffix('%') else {
        return Err(UnitError {
            message: format!("`{text}` is not a percentage"),
            hint: hint.into(),
        });
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(Percent(v)),
        Ok(_) => Err(UnitError {
            message: format!("percentage `{text}` must be zero or more"),
            hint: hint.into(),
        }),
        Err(_) => Err(UnitError {
            message: format!("`{text}` is not a percentage"),
            hint: hint.into(),
        }),
    }
}

/// Parses a duration `250 ms` or `1.5 s` into milliseconds.
///
/// ```
/// use gate_spec::units::parse_millis;
/// assert_eq!(parse_millis("250 ms").unwrap(), 250.0);
/// assert_eq!(parse_millis("1.5s").unwrap(), 1500.0);
/// assert!(parse_millis("1 us").unwrap_err().message.contains("unknown duration unit `us`"));
/// ```
pub fn parse_millis(text: &str) -> Result<f64, UnitError> {
    let hint = "write a duration with a unit, ms or s, e.g. `250 ms` or `2 s`";
    let t = text.trim();
    // The unit is the trailing letters; what is before them is the number.
    let num = t.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &t[num.len()..];
    let scale = match unit {
        "ms" => 1.0,
        "s" => 1000.0,
        "" => {
            return Err(UnitError {
                message: format!("duration `{text}` has no unit"),
                hint: hint.into(),
            })
        }
        other => {
            return Err(UnitError {
                message: format!("unknown duration unit `{other}` in `{text}`"),
                hint: hint.into(),
            })
        }
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v * scale),
        _ => Err(UnitError {
            message: format!("`{text}` is not a positive duration"),
            hint: hint.into(),
        }),
    }
}

/// A size unit as a person writes it in a budget (`300 MB`, `1.5 GiB`):
/// a budget's figures are shown in the unit its limit was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SizeUnit {
    B,
    KB,
    MB,
    GB,
    KiB,
    MiB,
    GiB,
}

impl SizeUnit {
    pub fn parse(text: &str) -> Option<SizeUnit> {
        Some(match text {
            "B" => SizeUnit::B,
            "KB" | "kB" => SizeUnit::KB,
            "MB" => SizeUnit::MB,
            "GB" => SizeUnit::GB,
            "KiB" => SizeUnit::KiB,
            "MiB" => SizeUnit::MiB,
            "GiB" => SizeUnit::GiB,
            _ => return None,
        })
    }

    /// The unit of a size as written (`300 MB` → MB); `None` if it is not a size.
    pub fn of(text: &str) -> Option<SizeUnit> {
        let t = text.trim();
        let split = t.find(|c: char| c.is_ascii_alphabetic())?;
        SizeUnit::parse(t[split..].trim())
    }

    pub fn scale(self) -> u64 {
        match self {
            SizeUnit::B => 1,
            SizeUnit::KB => 1000,
            SizeUnit::MB => 1000 * 1000,
            SizeUnit::GB => 1000 * 1000 * 1000,
            SizeUnit::KiB => KIB,
            SizeUnit::MiB => MIB,
            SizeUnit::GiB => GIB,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SizeUnit::B => "B",
            SizeUnit::KB => "KB",
            SizeUnit::MB => "MB",
            SizeUnit::GB => "GB",
            SizeUnit::KiB => "KiB",
            SizeUnit::MiB => "MiB",
            SizeUnit::GiB => "GiB",
        }
    }

    /// `bytes` in this unit with four significant digits (one decimal at
    /// least, none for whole bytes), so a change of 0.1 % stays visible:
    /// `312.4 MB`, `0.9537 GB`, `-1.250 MB`.
    pub fn format(self, bytes: f64) -> String {
        let v = bytes / self.scale() as f64;
        if self == SizeUnit::B {
            return format!("{} B", bytes.round());
        }
        if v == 0.0 {
            return format!("0 {}", self.name());
        }
        format!("{v:.*} {}", decimals(v.abs()), self.name())
    }

    /// A limit as written: `300 MB`, `1.5 GiB` (the shortest exact number).
    pub fn format_limit(self, bytes: f64) -> String {
        let v = bytes / self.scale() as f64;
        // Shortest round-trip text of the written number, without float noise.
        let rounded = (v * 1e6).round() / 1e6;
        format!("{rounded} {}", self.name())
    }
}

/// `1.0` → `1`, `2.50` → `2.5`: numbers as a person writes them.
pub fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_use_decimal_and_binary_units_exactly() {
        assert_eq!(parse_size("300 MB").unwrap(), Bytes(300_000_000));
        assert_eq!(parse_size("1 GiB").unwrap(), Bytes(GIB));
        assert_eq!(parse_size("1.5KiB").unwrap(), Bytes(1536));
        assert_eq!(parse_size("512 B").unwrap(), Bytes(512));
        assert_eq!(parse_size("2.5 GB").unwrap(), Bytes(2_500_000_000));
        // An exponent is the number's, not a unit's.
        assert_eq!(parse_size("5e3 MiB").unwrap(), Bytes(5000 * MIB));
        assert_eq!(parse_size("1.5E+2 KB").unwrap(), Bytes(150_000));
        assert_eq!(parse_size("2e-3 KB").unwrap(), Bytes(2));
    }

    #[test]
    fn a_size_in_bytes_is_whole_and_a_unit_after_an_e_is_a_unit() {
        for (text, message) in [
            ("1.5 B", "size `1.5 B` is not a whole number of bytes"),
            ("5 EiB", "unknown size unit `EiB` in `5 EiB`"),
            ("5e MiB", "unknown size unit `e MiB` in `5e MiB`"),
            ("5 µB", "unknown size unit `µB` in `5 µB`"),
        ] {
            assert_eq!(parse_size(text).unwrap_err().message, message);
        }
        assert_eq!(
            parse_millis("1 us").unwrap_err().message,
            "unknown duration unit `us` in `1 us`"
        );
        assert_eq!(parse_millis("1e3 ms").unwrap(), 1000.0);
    }

    #[test]
    fn bare_numbers_zero_and_unknown_units_are_refused() {
        assert_eq!(parse_size("300").unwrap_err().message, "size `300` has no unit");
        assert!(parse_size("0 MB").unwrap_err().message.contains("greater than zero"));
        assert!(parse_size("-3 MB").unwrap_err().message.contains("greater than zero"));
        assert_eq!(
            parse_size("3 mb").unwrap_err().message,
            "unknown size unit `mb` in `3 mb`"
        );
    }

    #[test]
    fn percents_and_durations() {
        assert_eq!(parse_percent("5%").unwrap(), Percent(5.0));
        assert!(parse_percent("5").is_err());
        assert_eq!(parse_millis("250 ms").unwrap(), 250.0);
        assert_eq!(parse_millis("2s").unwrap(), 2000.0);
    }

    #[test]
    fn sizes_are_shown_in_the_unit_they_were_written_in() {
        assert_eq!(SizeUnit::of("300 MB"), Some(SizeUnit::MB));
        assert_eq!(SizeUnit::of("1.5GiB"), Some(SizeUnit::GiB));
        assert_eq!(SizeUnit::MB.format_limit(300_000_000.0), "300 MB");
        assert_eq!(SizeUnit::GB.format_limit(1e9), "1 GB");
        assert_eq!(SizeUnit::GiB.format_limit(1.5 * GIB as f64), "1.5 GiB");
        assert_eq!(SizeUnit::MB.format(312_412_345.0), "312.4 MB");
        assert_eq!(SizeUnit::GB.format(953_700_000.0), "0.9537 GB");
        assert_eq!(SizeUnit::MB.format(-1_250_000.0), "-1.250 MB");
        assert_eq!(SizeUnit::MB.format(0.0), "0 MB");
        assert_eq!(SizeUnit::B.format(512.0), "512 B");
        // A 0.1 % change is visible at any magnitude.
        assert_ne!(SizeUnit::MB.format(999_000_000.0), SizeUnit::MB.format(1_000_000_000.0));
        assert_ne!(SizeUnit::MB.format(100_000_000.0), SizeUnit::MB.format(100_100_000.0));
    }

    #[test]
    fn display_in_mib_with_unit() {
        assert_eq!(Bytes(300 * MIB).to_string(), "300.0 MiB");
        assert_eq!(Bytes(2048).to_string(), "2.000 KiB");
        assert_eq!(fmt_delta_bytes(-(MIB as i128)), "-1.000 MiB");
        // A 17.6 % change on a small figure stays visible.
        assert_eq!(Bytes(400 * KIB).to_string(), "0.3906 MiB");
        assert_eq!(Bytes(470 * KIB).to_string(), "0.4590 MiB");
        assert_eq!(Bytes(2952 * MIB).to_string(), "2952.0 MiB");
    }
}
