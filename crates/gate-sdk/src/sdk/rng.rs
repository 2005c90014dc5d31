//! A small seeded generator for weights, batches and dropout masks. candle's
//! CPU backend cannot be seeded, and the gate needs figures that repeat to the
//! byte and a loss that repeats to the bit.

/// SplitMix64: tiny, fast, and good enough for synthetic data.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng {
            state: seed ^ 0x9E37_79B9_7F4A_7C15,
        }
    }

    /// A generator for a named stream under `seed` (a parameter's name, say),
    /// so values do not depend on the order things are built in.
    pub fn for_name(seed: u64, name: &str) -> Self {
        let h = gate_spec::hash::fnv1a(name);
        Rng::new(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ h)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(f64::MIN_POSITIVE);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// An integer in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// `n` values uniform in `[lo, hi)`, as f32 (tensor data).
    pub fn uniform_vec(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f32> {
        (0..n).map(|_| (lo + (hi - lo) * self.uniform()) as f32).collect()
    }

    /// `n` values from a normal distribution, as f32 (tensor data).
    pub fn normal_vec(&mut self, n: usize, mean: f64, std: f64) -> Vec<f32> {
        (0..n).map(|_| (mean + std * self.normal()) as f32).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_names_differ() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(
            Rng::for_name(1, "a.weight").next_u64(),
            Rng::for_name(1, "b.weight").next_u64()
        );
        let mut r = Rng::new(3);
        let mean: f64 = (0..20_000).map(|_| r.normal()).sum::<f64>() / 20_000.0;
        assert!(mean.abs() < 0.03, "{mean}");
    }
}
