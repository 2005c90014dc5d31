//! A component's name in reports: `NAME`, or `NAME@VARIANT` for a variant
//! of the component `NAME` (the spec's `variants:`). The one place that
//! knows the separator; everything else asks here.

/// What separates a component from its variant.
pub const SEPARATOR: char = '@';

/// A component's name, split: its base component and its variant, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComponentName<'a> {
    /// The component it belongs to (itself, for a component).
    pub base: &'a str,
    /// The variant's own name (`plain` of `tft@plain`).
    pub variant: Option<&'a str>,
}

impl<'a> ComponentName<'a> {
    /// Splits `name` at its first separator.
    pub fn parse(name: &'a str) -> Self {
        match name.split_once(SEPARATOR) {
            Some((base, variant)) => ComponentName {
                base,
                variant: Some(variant),
            },
            None => ComponentName {
                base: name,
                variant: None,
            },
        }
    }
}

/// The name of `variant` of component `base`: `base@variant`.
pub fn variant_name(base: &str, variant: &str) -> String {
    format!("{base}{SEPARATOR}{variant}")
}

/// The component `name` belongs to: `tft` for `tft@plain` and for `tft`.
pub fn base_of(name: &str) -> &str {
    ComponentName::parse(name).base
}

/// Whether `name` is written as the spec allows a component's or a
/// variant's own name: letters, digits, `_` and `-`, at least one.
pub fn is_plain(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Whether `name` is a component's name as reports write it: a plain name,
/// or `NAME@VARIANT` of two plain names.
pub fn is_component_name(name: &str) -> bool {
    let n = ComponentName::parse(name);
    is_plain(n.base) && n.variant.is_none_or(is_plain)
}

/// Whether `name` names a variant.
pub fn is_variant(name: &str) -> bool {
    ComponentName::parse(name).variant.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_splits_at_its_first_separator() {
        assert_eq!(
            ComponentName::parse("tft@plain"),
            ComponentName {
                base: "tft",
                variant: Some("plain")
            }
        );
        assert_eq!(ComponentName::parse("tft").variant, None);
        assert_eq!(base_of("a@b@c"), "a");
        assert!(is_variant(&variant_name("tft", "bf16")) && !is_variant("tft"));
    }
}
