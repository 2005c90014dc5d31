//! The spec: `budgets.yaml` → a validated [`Spec`]. The only module that
//! knows YAML, and only `yaml.rs` inside it, behind the `yaml` feature: the
//! installed `gate` reads the file; a harness gets the validated [`Spec`]
//! from it (as JSON) and never parses YAML.

mod diagnostic;
#[cfg(feature = "yaml")]
pub mod edit;
mod measurable;
mod spec;
pub mod tree;
mod validate;
#[cfg(feature = "yaml")]
mod yaml;

use std::path::Path;

pub use crate::config::Pos;
pub use diagnostic::{Diagnostic, Diagnostics};
pub use measurable::cuda_only;
pub use spec::*;
/// A package or binary name as cargo takes one (what `harness:` accepts).
pub use validate::is_cargo_name;

/// Why a spec could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{path}: cannot read the spec: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: the spec is larger than {limit} bytes, the most gate reads")]
    TooLarge { path: String, limit: u64 },
    #[error("{0}")]
    Invalid(#[from] Diagnostics),
}

/// Checks a component's workload (its kind and config) while the spec is
/// validated, so its problems are reported with the spec's others, in one
/// go. The runner implements it with the binary's registry.
pub trait WorkloadCheck {
    /// The problems of `c`'s workload: position, message, hint.
    fn check(&self, c: &Component, has_harness: bool) -> Vec<(Pos, String, String)>;
}

/// The largest spec gate reads (64 MiB, some hundred thousand components):
/// a spec read from an endless source (`/dev/zero`) fails fast instead of
/// filling memory.
pub const MAX_SPEC_BYTES: u64 = 64 << 20;

/// The spec every `gate` command reads unless `--budgets` names another.
pub const DEFAULT_FILE: &str = "budgets.yaml";

/// Validates a spec's tree (`issues`: what the reader found while making
/// it), checking each workload with `check` when given.
pub fn validate_tree(
    path: &Path,
    root: &tree::Node,
    issues: Vec<tree::YamlIssue>,
    check: Option<&dyn WorkloadCheck>,
) -> Result<Spec, Diagnostics> {
    validate::validate(path, root, issues, 0, check)
}

/// Checks the workloads of a spec already validated, as [`parse_with`]
/// would have while validating it: each component's through `check`, the
/// problems sorted by position. A harness runs it on the spec the installed
/// `gate` sends it, so a config error reads as if the harness had read the file.
pub fn check_workloads(spec: &Spec, check: &dyn WorkloadCheck) -> Result<(), Diagnostics> {
    let mut diags: Vec<Diagnostic> =
        validate::check_workloads(&spec.components, check, spec.harness.is_some(), Vec::new())
            .into_iter()
            .map(|(pos, message, hint)| Diagnostic {
                file: spec.path.display().to_string(),
                pos,
                message,
                hint,
            })
            .collect();
    diags.sort_by_key(|d| d.pos);
    match diags.is_empty() {
        true => Ok(()),
        false => Err(Diagnostics::all(diags)),
    }
}

/// Parses and validates `text` as the spec at `path` (its workloads' configs unchecked).
#[cfg(feature = "yaml")]
pub fn parse(path: &Path, text: &str) -> Result<Spec, Diagnostics> {
    parse_with(path, text, None)
}

#[cfg(feature = "yaml")]
/// Parses and validates `text`, checking each workload with `check`.
pub fn parse_with(path: &Path, text: &str, check: Option<&dyn WorkloadCheck>) -> Result<Spec, Diagnostics> {
    match yaml::parse(text) {
        Ok((root, issues, dropped)) => validate::validate(path, &root, issues, dropped, check),
        Err(issue) => Err(one(path, issue)),
    }
}

#[cfg(feature = "yaml")]
/// Parses and validates raw file bytes: a UTF-8 byte-order mark is
/// skipped; UTF-16/UTF-32 (known by their mark) and any other non-UTF-8
/// bytes are refused by name, at the first bad byte.
pub fn parse_bytes(path: &Path, bytes: &[u8]) -> Result<Spec, Diagnostics> {
    parse_bytes_with(path, bytes, None)
}

#[cfg(feature = "yaml")]
/// [`parse_bytes`], checking each workload with `check`.
pub fn parse_bytes_with(path: &Path, bytes: &[u8], check: Option<&dyn WorkloadCheck>) -> Result<Spec, Diagnostics> {
    let text = yaml::decode(bytes).map_err(|issue| one(path, issue))?;
    parse_with(path, text, check)
}

#[cfg(feature = "yaml")]
/// Reads and validates the spec file at `path` (its workloads' configs unchecked).
pub fn load(path: &Path) -> Result<Spec, SpecError> {
    load_with(path, None)
}

#[cfg(feature = "yaml")]
/// Reads and validates the spec file at `path`, checking each workload with `check`.
pub fn load_with(path: &Path, check: Option<&dyn WorkloadCheck>) -> Result<Spec, SpecError> {
    Ok(parse_bytes_with(path, &read(path)?, check)?)
}

/// The spec file's bytes, at most [`MAX_SPEC_BYTES`].
pub fn read(path: &Path) -> Result<Vec<u8>, SpecError> {
    let read_err = |source| SpecError::Read {
        path: path.display().to_string(),
        source,
    };
    let mut bytes = Vec::new();
    let file = std::fs::File::open(path).map_err(read_err)?;
    std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_SPEC_BYTES + 1), &mut bytes).map_err(read_err)?;
    if bytes.len() as u64 > MAX_SPEC_BYTES {
        return Err(SpecError::TooLarge {
            path: path.display().to_string(),
            limit: MAX_SPEC_BYTES,
        });
    }
    Ok(bytes)
}

#[cfg(feature = "yaml")]
fn one(path: &Path, issue: tree::YamlIssue) -> Diagnostics {
    Diagnostics::all(vec![Diagnostic {
        file: path.display().to_string(),
        pos: issue.pos,
        message: issue.message,
        hint: issue.hint,
    }])
}

#[cfg(all(test, feature = "yaml"))]
mod tests {
    use super::*;

    const SPEC: &str = "version: 1
harness: { package: ml, bin: gate-harness, features: [fast], manifest: crates/ml/Cargo.toml }
device: { name: card, capacity: 4 GiB, reserve: 300 MiB, emulate: true }
defaults: { seed: 7, tolerance: 3% }
components:
  a:
    workload: net
    batch_size: 8
    dtype: bf16
    master_weights: f32
    timing: { warmup: 2, steps: 5, pairs: 4 }
    config: { width: 64, bad: 1, nested: { deep: [1, \"two\", ~] } }
    budgets: { training_peak: < 1.5 GiB, loss_ratio: < 1.05, step_time_ratio: < 2 }
    reference: plain
    variants:
      plain: { checkpoint: none }
  b:
    workload: other
    config: { bad: 2 }
    budgets: { params: < 10 MB, step_time: < 2.5 s }
ensemble:
  members: [a, b]
  budgets: { total: < 2 GB, headroom: \"> 1 GB\" }
";

    /// Flags every config key `bad`, at its position.
    struct NoBad;

    impl WorkloadCheck for NoBad {
        fn check(&self, c: &Component, _: bool) -> Vec<(Pos, String, String)> {
            c.config
                .key_pos("bad")
                .map(|p| (p, format!("`bad` in `{}`", c.name), "remove it".to_string()))
                .into_iter()
                .collect()
        }
    }

    #[test]
    fn a_spec_crosses_to_a_harness_as_json_unchanged() {
        let spec = parse(Path::new("budgets.yaml"), SPEC).unwrap();
        let json = serde_json::to_string(&spec).unwrap();
        let back: Spec = serde_json::from_str(&json).unwrap();
        // Positions included: a harness's config errors point into the file.
        assert_eq!(format!("{back:?}"), format!("{spec:?}"));
        assert_eq!(
            back.components[0].config.key_pos("nested.deep"),
            Some(Pos { line: 12, col: 44 })
        );
    }

    #[test]
    fn checking_a_validated_spec_finds_what_checking_while_parsing_does() {
        let spec = parse(Path::new("budgets.yaml"), SPEC).unwrap();
        let later = check_workloads(&spec, &NoBad).unwrap_err();
        let at_once = parse_with(Path::new("budgets.yaml"), SPEC, Some(&NoBad)).unwrap_err();
        assert_eq!(later, at_once);
        // The variant repeats its component's problem; it is said once.
        assert_eq!(later.0.len(), 2, "{later}");
        assert_eq!(
            later.0[0].to_string(),
            "budgets.yaml:12:26: error: `bad` in `a`\n  hint: remove it"
        );
    }

    use crate::units::Percent;

    const DRIFTING: &str = "version: 1
anchor: v1.4.0
device: { name: card, capacity: 4 GiB }
defaults: { drift: 10% }
components:
  a:
    workload: net
    budgets: { training_peak: < 1 GiB }
  b:
    workload: net
    drift: 2.5%
    budgets: { params: < 1 MiB }
";

    #[test]
    fn a_drift_is_read_with_its_anchor_and_a_component_may_write_its_own() {
        let spec = parse(Path::new("budgets.yaml"), DRIFTING).unwrap();
        assert_eq!(
            spec.anchor,
            Some(AnchorName {
                name: "v1.4.0".into(),
                line: 2,
                col: 9
            })
        );
        let drift: Vec<_> = spec.components.iter().map(|c| c.drift).collect();
        assert_eq!(drift, [Some(Percent(10.0)), Some(Percent(2.5))]);
        // Without either, nothing is judged since an anchor.
        let plain = parse(
            Path::new("budgets.yaml"),
            &DRIFTING
                .replace("anchor: v1.4.0\n", "")
                .replace("defaults: { drift: 10% }\n", "")
                .replace("    drift: 2.5%\n", ""),
        )
        .unwrap();
        assert_eq!(plain.anchor, None);
        assert!(plain.components.iter().all(|c| c.drift.is_none()));
    }

    #[test]
    fn a_drift_without_an_anchor_an_anchor_without_a_drift_and_a_bad_name_are_errors() {
        let err = |text: &str| parse(Path::new("budgets.yaml"), text).unwrap_err().to_string();
        assert_eq!(
            err(&DRIFTING.replace("anchor: v1.4.0\n", "")),
            "budgets.yaml:3:20: error: `drift` needs an anchor: the spec has no `anchor:`\n  \
             hint: add `anchor: v1.4.0` at the top level: a release tag, or a baseline stored with `gate baseline \
             publish --anchor NAME`; drift is the growth since that report"
        );
        assert_eq!(
            err(&DRIFTING
                .replace("defaults: { drift: 10% }\n", "")
                .replace("    drift: 2.5%\n", "")),
            "budgets.yaml:2:1: error: `anchor` `v1.4.0` judges nothing: no component has a `drift:`\n  \
             hint: add `drift: 10%` under `defaults:` (or a component): the most a size may grow since the anchor"
        );
        assert_eq!(
            err(&DRIFTING.replace("v1.4.0", "../main")),
            "budgets.yaml:2:9: error: `anchor` `../main` is not a release tag or a baseline's name\n  \
             hint: write a release tag such as `v1.4.0`, or a name of letters, digits, `.`, `_`, `-` and `+` \
             (at most 100, not starting with `.`)"
        );
        assert_eq!(
            err(&DRIFTING.replace("2.5%", "2.5")),
            "budgets.yaml:11:12: error: drift: `2.5` is not a percentage\n  hint: write a percentage such as `5%`"
        );
    }
}
