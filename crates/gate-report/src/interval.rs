//! A confidence interval for a median that assumes nothing about how the
//! samples are distributed (step times are skewed: a stall makes a step
//! slow, never fast, so a mean ± t·s interval would be wrong).
//!
//! The order-statistic interval (the binomial, or sign-test, interval):
//! with the n samples sorted, x₍k₎ ≤ median ≤ x₍n+1−k₎ holds with
//! probability 1 − 2·P(B ≤ k−1), B ~ Binomial(n, ½), for any continuous
//! distribution. k is the largest that keeps this at or above the
//! confidence asked for, so the interval is the narrowest such one. The
//! coverage is exact, not approximate; it is reported as is (e.g. 96.5 %
//! for 15 samples at 95 %). Fewer than 6 samples have no 95 % interval:
//! even [min, max] covers the median only with 1 − 2·½⁵ = 93.75 % for 5.

use gate_contract::report::Interval;

/// The confidence gate asks for.
pub const CONFIDENCE: f64 = 0.95;

/// The median's distribution-free interval at `confidence` (or more), or
/// `None` when `xs` is too short to have one (or holds a non-finite value).
pub fn median_interval(xs: &[f64], confidence: f64) -> Option<Interval> {
    if xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    // tail(k) = P(B ≤ k − 1): the chance that fewer than k samples lie
    // below the median. Summed term by term from P(B = 0) = ½ⁿ, which is
    // exact enough in f64 up to n ≈ 1000 (far beyond any timed run).
    let alpha = 1.0 - confidence;
    let mut term = 0.5f64.powi(n.min(1000) as i32);
    let mut below = 0.0; // P(B ≤ k − 1) for the current k
    let mut best = None;
    for k in 1..=n / 2 {
        below += term; // now P(B ≤ k − 1)
        if 2.0 * below > alpha + 1e-12 {
            break;
        }
        best = Some((k, 1.0 - 2.0 * below));
        // P(B = k) from P(B = k − 1).
        term = term * (n - (k - 1)) as f64 / k as f64; // exact: multiply, then divide
    }
    let (k, coverage) = best?;
    Some(Interval {
        low: v[k - 1],
        high: v[n - k],
        confidence: coverage,
        samples: n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xs(n: usize) -> Vec<f64> {
        // 1..=n in a scrambled order: the interval sorts.
        (1..=n).rev().map(|i| i as f64).collect()
    }

    #[test]
    fn fifteen_samples_give_the_4th_and_12th_at_96_5_percent() {
        // P(B ≤ 3) = (1 + 15 + 105 + 455) / 2¹⁵ = 576 / 32768; P(B ≤ 4) = 1941 / 32768 > 2.5 %.
        let i = median_interval(&xs(15), CONFIDENCE).unwrap();
        assert_eq!((i.low, i.high, i.samples), (4.0, 12.0, 15));
        assert_eq!(i.confidence, 1.0 - 2.0 * 576.0 / 32768.0);
    }

    #[test]
    fn six_samples_are_the_fewest_with_a_95_percent_interval() {
        let i = median_interval(&xs(6), CONFIDENCE).unwrap();
        assert_eq!((i.low, i.high, i.samples), (1.0, 6.0, 6));
        assert_eq!(i.confidence, 1.0 - 2.0 / 64.0);
        assert_eq!(median_interval(&xs(5), CONFIDENCE), None);
        assert_eq!(median_interval(&[], CONFIDENCE), None);
    }

    #[test]
    fn other_sizes_and_confidences() {
        // n = 10: P(B ≤ 1) = 11 / 1024 → [x₂, x₉] at 97.85 %; P(B ≤ 2) = 56 / 1024 is too much.
        let i = median_interval(&xs(10), CONFIDENCE).unwrap();
        assert_eq!((i.low, i.high), (2.0, 9.0));
        assert_eq!(i.confidence, 1.0 - 2.0 * 11.0 / 1024.0);
        // n = 20: P(B ≤ 5) = 21700 / 2²⁰ → [x₆, x₁₅] at 95.86 %.
        let i = median_interval(&xs(20), CONFIDENCE).unwrap();
        assert_eq!((i.low, i.high), (6.0, 15.0));
        assert_eq!(i.confidence, 1.0 - 2.0 * 21700.0 / 1048576.0);
        // At 90 %, five samples suffice: [min, max] at 93.75 %.
        let i = median_interval(&xs(5), 0.90).unwrap();
        assert_eq!((i.low, i.high, i.confidence), (1.0, 5.0, 0.9375));
    }

    #[test]
    fn a_non_finite_sample_has_no_interval() {
        let mut v = xs(8);
        v[3] = f64::NAN;
        assert_eq!(median_interval(&v, CONFIDENCE), None);
    }
}
