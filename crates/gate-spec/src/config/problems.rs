//! What a workload's own checks find in its config, as problems with the
//! key they are about and a hint, said like any spec error; and the bound
//! on what one config may size (no machine allocates past it).

use std::fmt::{self, Display};

use super::Pos;

/// The most bytes one tensor that a workload's config sizes may take, as
/// [`Problems::allocatable`] checks it: 1 TiB, more than any one
/// accelerator holds and than most hosts do. A larger one fails only when
/// the model is built; refused when the spec is validated, it is a spec
/// error at its key.
pub const MAX_TENSOR_BYTES: u64 = 1 << 40;

/// The bytes of an element [`Problems::allocatable`] counts with: the widest
/// dtype (f64), since a config is checked before the run's dtype is known.
pub const WIDEST_ELEMENT_BYTES: u64 = 8;

/// A byte count far past MiB, in the largest binary unit it fills: `2.0 PiB`.
fn large(bytes: u64) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let (mut v, mut u) = (bytes as f64, 0);
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", units[u])
}

/// One problem with a config: where, which key, what, and the fix.
/// Read from [`Problems::issues`]; built with [`ConfigIssue::new`] (and
/// [`ConfigIssue::at`]), so a field added later breaks no one.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConfigIssue {
    /// Where it was found; `None` until the reader knows.
    pub pos: Option<Pos>,
    /// The key path (`hidden_dim`, `encoder.width`), or `None` for the whole config.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub hint: String,
}

impl ConfigIssue {
    /// A problem with `key` (`None`: the whole config), at no position yet:
    /// `message` says what is wrong, `hint` how to fix it.
    ///
    /// ```
    /// let i = gate_spec::config::ConfigIssue::new(Some("heads"), "`heads` must divide `hidden_dim`", "use 4 heads");
    /// assert_eq!((i.key.as_deref(), i.pos), (Some("heads"), None));
    /// ```
    pub fn new(key: Option<&str>, message: impl Into<String>, hint: impl Into<String>) -> Self {
        ConfigIssue {
            pos: None,
            key: key.map(str::to_string),
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// This problem at `pos` in the spec file.
    pub fn at(mut self, pos: Pos) -> Self {
        self.pos = Some(pos);
        self
    }
}

/// The problems a workload finds in its config after it was read: values
/// out of range, keys that disagree. Each names its key, so the spec error
/// points at the line where the key is written.
///
/// ```
/// let mut p = gate_spec::config::Problems::new();
/// p.at_least("hidden_dim", 0usize, 1);
/// p.error("heads", "`heads` must divide `hidden_dim`", "use 4 heads for hidden_dim 64");
/// assert_eq!(p.len(), 2);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Problems {
    issues: Vec<ConfigIssue>,
}

impl Problems {
    /// No problems yet.
    pub fn new() -> Self {
        Problems::default()
    }

    /// Records a problem with `key` (a top-level key of the config, or a
    /// dotted path into it).
    pub fn error(&mut self, key: &str, message: impl Into<String>, hint: impl Into<String>) {
        self.issues.push(ConfigIssue::new(Some(key), message, hint));
    }

    /// Records that `key` must be a positive integer when `value` is 0.
    pub fn positive(&mut self, key: &str, value: usize) {
        if value == 0 {
            self.error(
                key,
                format!("`{key}` must be a positive integer, found 0"),
                "use a whole number of at least 1",
            );
        }
    }

    /// Records that the number `key` must lie in `[lo, hi]` when `value` does not.
    pub fn number(&mut self, key: &str, value: f64, lo: f64, hi: f64) {
        if !(value >= lo && value <= hi) {
            self.error(
                key,
                format!("`{key}` must be a number from {lo} to {hi}, found {value}"),
                format!("set `{key}` to a number from {lo} to {hi}"),
            );
        }
    }

    /// Records that `key` must be at least `min` when `value` is below it.
    pub fn at_least<T: PartialOrd + Display>(&mut self, key: &str, value: T, min: T) {
        if value < min {
            self.error(
                key,
                format!("`{key}` must be at least {min}, found {value}"),
                format!("set `{key}` to {min} or more"),
            );
        }
    }

    /// Records that `key` must lie in `[lo, hi]` when `value` does not.
    pub fn within<T: PartialOrd + Display>(&mut self, key: &str, value: T, lo: T, hi: T) {
        if !(value >= lo && value <= hi) {
            self.error(
                key,
                format!("`{key}` must be from {lo} to {hi}, found {value}"),
                format!("set `{key}` to a value from {lo} to {hi}"),
            );
        }
    }

    /// Records that what `shape` describes cannot be allocated: its
    /// elements, the product of the dimensions, at [`WIDEST_ELEMENT_BYTES`]
    /// each, would take more than [`MAX_TENSOR_BYTES`] (or their count
    /// overflows). Each dimension comes with the config key it is read from;
    /// the problem is put at the largest one's. `what` names it in the
    /// message (`the first layer's weights`). Returns whether it fits.
    ///
    /// A built-in or an adopter's workload calls it for each tensor its
    /// config sizes (and for a stack of layers as a whole), so a dimension
    /// no machine can hold is a spec error at `file:line:col`, not a failed
    /// allocation when the model is built.
    ///
    /// ```
    /// let mut p = gate_spec::config::Problems::new();
    /// assert!(p.allocatable("the first layer's weights", &[("input_dim", 256), ("hidden_dim", 512)]));
    /// assert!(!p.allocatable("the first layer's weights", &[("input_dim", 1 << 41), ("hidden_dim", 512)]));
    /// assert_eq!(p.issues()[0].key.as_deref(), Some("input_dim"));
    /// ```
    pub fn allocatable(&mut self, what: &str, shape: &[(&str, usize)]) -> bool {
        let elements = shape.iter().try_fold(1u64, |n, &(_, d)| n.checked_mul(d as u64));
        let bytes = elements.and_then(|n| n.checked_mul(WIDEST_ELEMENT_BYTES));
        if bytes.is_some_and(|b| b <= MAX_TENSOR_BYTES) {
            return true;
        }
        // The largest dimension, the first of equals.
        let Some(&(key, largest)) = shape.iter().rev().max_by_key(|(_, d)| *d) else {
            return true;
        };
        // One problem a key: the same dimension often sizes several tensors.
        if self.issues.iter().any(|i| i.key.as_deref() == Some(key)) {
            return false;
        }
        let dims = shape
            .iter()
            .map(|(k, d)| format!("`{k}` ({d})"))
            .collect::<Vec<_>>()
            .join(" × ");
        let size = match bytes {
            Some(b) => large(b),
            None => format!("more than {}", large(u64::MAX)),
        };
        self.error(
            key,
            format!(
                "{dims} is too large to allocate: {what} would take {size} at {WIDEST_ELEMENT_BYTES} bytes an element, and gate allows {}",
                large(MAX_TENSOR_BYTES)
            ),
            format!("lower `{key}` (now {largest}): {what} must fit in {}", large(MAX_TENSOR_BYTES)),
        );
        false
    }

    /// How many problems were recorded.
    pub fn len(&self) -> usize {
        self.issues.len()
    }

    /// Whether none were.
    pub fn is_empty(&self) -> bool {
        self.issues.is_empty()
    }

    /// `Ok(value)` when nothing was recorded, else the problems.
    pub fn finish<T>(self, value: T) -> Result<T, Problems> {
        if self.issues.is_empty() {
            Ok(value)
        } else {
            Err(self)
        }
    }

    /// The recorded problems.
    pub fn issues(&self) -> &[ConfigIssue] {
        &self.issues
    }

    pub fn into_issues(self) -> Vec<ConfigIssue> {
        self.issues
    }
}

impl Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.issues.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}", p.message)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #28 item 16: what no machine can allocate is a problem at its
    /// largest dimension's key, once a key; a 64-bit overflow is one too.
    #[test]
    fn allocatable_bounds_what_a_config_sizes_at_the_largest_key() {
        let mut p = Problems::new();
        assert!(
            p.allocatable("w", &[("a", 1 << 18), ("b", 1 << 19)]),
            "exactly 1 TiB fits"
        );
        assert!(p.is_empty());
        assert!(!p.allocatable("w", &[("a", 1 << 18), ("b", (1 << 19) + 1)]));
        assert!(!p.allocatable("v", &[("b", 1 << 40)]), "refused again, said once");
        assert!(!p.allocatable("u", &[("c", usize::MAX), ("d", usize::MAX)]));
        let keys: Vec<_> = p.issues().iter().map(|i| i.key.as_deref().unwrap()).collect();
        assert_eq!(keys, ["b", "c"]);
        assert_eq!(
            p.issues()[0].message,
            "`a` (262144) × `b` (524289) is too large to allocate: w would take 1.0 TiB at 8 bytes an element, and gate allows 1.0 TiB"
        );
        assert_eq!(p.issues()[0].hint, "lower `b` (now 524289): w must fit in 1.0 TiB");
        assert!(
            p.issues()[1].message.contains("would take more than 16.0 EiB"),
            "{}",
            p.issues()[1].message
        );
    }
}
