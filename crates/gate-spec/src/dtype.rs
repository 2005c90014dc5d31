//! The dtypes a spec can ask a model to compute in. gate's own enum, so the
//! spec (and everything below the adapter) names no ML framework; each
//! adapter maps it to its framework's dtype.

use std::fmt;

/// A floating-point dtype of the spec's `dtype:` and `master_weights:`.
/// In JSON (plan.json, sweep.json) by the spec's own names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// 32-bit IEEE float (`f32`).
    F32,
    /// 16-bit IEEE float (`f16`).
    F16,
    /// bfloat16 (`bf16`).
    BF16,
}

impl DType {
    /// Every dtype, in the order the spec's hint lists them.
    pub const ALL: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

    /// The spec's (and the report's) name: `f32`, `f16`, `bf16`.
    pub fn as_str(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
        }
    }

    /// Bytes of one element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }

    /// The dtype the spec names `name`, if it is one.
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.as_str() == name)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::DType;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.as_str()), Some(d));
        }
        assert_eq!(DType::from_name("f64"), None);
        assert_eq!(DType::BF16.size_in_bytes(), 2);
    }
}
