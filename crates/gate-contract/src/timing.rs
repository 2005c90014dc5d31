//! What timing the steps is made of, on both sides of the protocol: how
//! many interleaved pairs a ratio takes, and the median a step time and a
//! ratio are reported as.

/// The fewest pairs with a 95 % interval for their median (gate-report's `interval`).
pub const MIN_PAIRS: usize = 6;

/// After [`MIN_PAIRS`], no new pair starts once the pairs have taken this
/// long: a model whose step takes seconds (the original TFT on one CPU
/// core takes 4–11 s) stops at 6 pairs instead of 15. On a GPU, 15 pairs of
/// sub-second steps fit well inside it.
pub const PAIR_SECONDS: f64 = 30.0;

/// The median of `xs` (the mean of the two middle values for an even count).
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
