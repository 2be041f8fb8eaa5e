//! Seeded random demand sets: the same seed gives the same clients on every machine, so a
//! figure measured in the simulator or the namespace lab can be reproduced by its seed.

/// SplitMix64: tiny, fast, and good enough to draw test inputs; not for anything secret.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Uniform in [0, n) (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// An exponentially distributed wait with mean `mean` (at least 1).
    pub fn exp(&mut self, mean: f64) -> u64 {
        let u = self.unit().max(1e-12);
        ((-u.ln()) * mean).max(1.0) as u64
    }
}

/// How a demand set is drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct DemandSpec {
    pub seed: u64,
    /// Number of clients.
    pub clients: usize,
    /// Total demand, in the unit of `max_each`.
    pub total: f64,
    /// No client demands more than this (keeps every client movable: an elephant bigger than
    /// a port is a different problem).
    pub max_each: f64,
    /// Smallest raw weight relative to the largest, in (0, 1]: 0.25 gives demands that differ
    /// by up to four times.
    pub spread: f64,
}

/// Demands summing to `spec.total`, each at most `spec.max_each`, rounded to 0.1 (a tbf takes
/// kbit/s; round numbers read better in a table). Deterministic in the spec.
pub fn demands(spec: &DemandSpec) -> Result<Vec<f64>, String> {
    if spec.clients == 0 {
        return Err("clients: at least one is needed".into());
    }
    if !(spec.total.is_finite() && spec.total > 0.0) {
        return Err(format!("total: {} is not a positive number", spec.total));
    }
    if spec.total > spec.max_each * spec.clients as f64 {
        return Err(format!(
            "total: {} clients of at most {} cannot demand {}",
            spec.clients, spec.max_each, spec.total
        ));
    }
    if !(spec.spread > 0.0 && spec.spread <= 1.0) {
        return Err(format!("spread: {} is not in (0, 1]", spec.spread));
    }
    let mut rng = Rng::new(spec.seed);
    // Redraw until no client is over the limit; rare for the sets used here, and bounded.
    for _ in 0..10_000 {
        let w: Vec<f64> = (0..spec.clients)
            .map(|_| rng.range(spec.spread, 1.0))
            .collect();
        let sum: f64 = w.iter().sum();
        let mut d: Vec<f64> = w
            .iter()
            .map(|x| (x / sum * spec.total * 10.0).round() / 10.0)
            .collect();
        // Rounding may leave the sum a few tenths off: settle it on the largest client.
        let off = spec.total - d.iter().sum::<f64>();
        if let Some(big) = (0..d.len()).max_by(|&a, &b| d[a].total_cmp(&d[b])) {
            d[big] = ((d[big] + off) * 10.0).round() / 10.0;
        }
        if d.iter().all(|&x| x > 0.0 && x <= spec.max_each) {
            return Ok(d);
        }
    }
    Err(format!(
        "no demand set under {} found for seed {}",
        spec.max_each, spec.seed
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(seed: u64) -> DemandSpec {
        DemandSpec {
            seed,
            clients: 11,
            total: 73.6,
            max_each: 12.0,
            spread: 0.25,
        }
    }

    #[test]
    fn same_seed_same_set_and_the_sum_is_kept() {
        for seed in 0..50 {
            let a = demands(&spec(seed)).unwrap();
            assert_eq!(a, demands(&spec(seed)).unwrap());
            assert_eq!(a.len(), 11);
            assert!((a.iter().sum::<f64>() - 73.6).abs() < 1e-6, "{a:?}");
            assert!(a.iter().all(|&x| x > 0.0 && x <= 12.0), "{a:?}");
        }
        assert_ne!(demands(&spec(1)).unwrap(), demands(&spec(2)).unwrap());
    }

    #[test]
    fn impossible_specs_are_refused() {
        let mut s = spec(1);
        s.total = 200.0;
        assert!(demands(&s).unwrap_err().starts_with("total"));
        s.total = 10.0;
        s.clients = 0;
        assert!(demands(&s).is_err());
    }
}
