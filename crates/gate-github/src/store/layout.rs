//! The store's layout: a folder per card under `reports/` and `anchors/`,
//! and the files of a store written before cards straight under them.

use gate_contract::report::Testbed;

/// The folder of a card's reports and anchors: the testbed's backend, its
/// device as far as it changes the figures ([`Testbed::comparable_device`]:
/// any CPU is `cpu`) and its architecture, in lower case with every other
/// character a `-` (`cuda-nvidia-h100-80gb-hbm3-x86_64`, `cpu-x86_64`). It
/// is known only once a run has measured, so a run reads every card's
/// nearest report and compares with its own card's (see `auto_baseline`).
pub fn card_of(testbed: &Testbed) -> String {
    let device = testbed.comparable_device();
    let parts: Vec<&str> = [testbed.backend.as_str(), device, testbed.arch.as_str()]
        .into_iter()
        .enumerate()
        // The CPU's device is its backend's name again.
        .filter(|(i, p)| !p.is_empty() && (*i != 1 || *p != testbed.backend))
        .map(|(_, p)| p)
        .collect();
    let mut card = String::new();
    for c in parts.join("-").chars().flat_map(char::to_lowercase) {
        let c = if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
            c
        } else {
            '-'
        };
        if !(c == '-' && (card.is_empty() || card.ends_with('-'))) {
            card.push(c);
        }
    }
    // Never `.`/`..`, never a hidden name, at most 80 characters.
    let card: String = card.trim_start_matches(['.', '-']).chars().take(80).collect();
    let card = card.trim_end_matches(['.', '-']);
    if card.is_empty() {
        "unknown".into()
    } else {
        card.into()
    }
}

/// Whether `name` is a card's folder as [`card_of`] names them.
pub(super) fn is_card(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 80
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
}

/// Where a report is stored: in a card's folder, or (a store written before
/// cards) straight under `reports/`, one card per branch.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Place {
    /// `reports/<sha>.json`, `anchors/<name>.json`.
    BeforeCards,
    /// `reports/<card>/<sha>.json`, `anchors/<card>/<name>.json`.
    Card(String),
}

impl Place {
    pub(super) fn file(&self, dir: &str, name: &str) -> String {
        match self {
            Place::BeforeCards => format!("{dir}/{name}.json"),
            Place::Card(card) => format!("{dir}/{card}/{name}.json"),
        }
    }
}

/// A path under `reports/` as a stored report's commit and place (`None`:
/// not a report's file).
pub fn stored_at(rel: &str) -> Option<(String, Place)> {
    let (place, file) = match rel.split_once('/') {
        None => (Place::BeforeCards, rel),
        Some((card, file)) if is_card(card) && !file.contains('/') => (Place::Card(card.into()), file),
        Some(_) => return None,
    };
    let sha = file.strip_suffix(".json")?;
    Some((sha.to_ascii_lowercase(), place))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn testbed(backend: &str, device: &str, arch: &str) -> Testbed {
        Testbed {
            backend: backend.into(),
            device_name: device.into(),
            arch: arch.into(),
            ..Testbed::default()
        }
    }

    #[test]
    fn a_card_is_its_backend_device_and_architecture_as_one_safe_name() {
        assert_eq!(
            card_of(&testbed("cuda", "NVIDIA H100 80GB HBM3", "x86_64")),
            "cuda-nvidia-h100-80gb-hbm3-x86_64"
        );
        // Any CPU of an architecture is one card, as its figures compare.
        assert_eq!(
            card_of(&testbed("cpu", "AMD EPYC 7763 64-Core Processor", "x86_64")),
            "cpu-x86_64"
        );
        assert_eq!(card_of(&testbed("cpu", "", "aarch64")), "cpu-aarch64");
        // A name from a runner never leaves its folder or hides.
        assert_eq!(card_of(&testbed("cuda", "../../x/ÿ", "")), "cuda-..-..-x");
        assert_eq!(card_of(&testbed("", "", "")), "unknown");
        assert_eq!(card_of(&testbed(".", "..", "")), "unknown");
        for t in [
            testbed("cuda", "../../x/ÿ", ""),
            testbed("cuda", &"A".repeat(300), "x86_64"),
        ] {
            assert!(is_card(&card_of(&t)), "{}", card_of(&t));
        }
    }

    #[test]
    fn a_listing_reads_both_layouts_and_nothing_else() {
        let sha = "AB".repeat(20);
        assert_eq!(
            stored_at(&format!("{sha}.json")),
            Some((sha.to_ascii_lowercase(), Place::BeforeCards))
        );
        assert_eq!(
            stored_at(&format!("cpu-x86_64/{sha}.json")),
            Some((sha.to_ascii_lowercase(), Place::Card("cpu-x86_64".into())))
        );
        assert_eq!(stored_at(&format!("a/b/{sha}.json")), None);
        assert_eq!(stored_at(&format!(".hidden/{sha}.json")), None);
        assert_eq!(stored_at("README.md"), None);
        assert_eq!(
            crate::store::Store::file_path("abc", "cpu-x86_64"),
            "reports/cpu-x86_64/abc.json"
        );
        assert_eq!(
            crate::store::Store::anchor_path("v1.4.0", "cpu-x86_64"),
            "anchors/cpu-x86_64/v1.4.0.json"
        );
    }
}
