//! What the daemon reads of each client's rate when a busy port is sampled (a scenario's
//! `sampling`): each port's ratio is the engine's (it reads the port's packet counter), and
//! each client's packets of a second are kept one in N at random and counted N times, as the
//! kernel's program counts them. Without `sampling` every packet is counted.

use serde::Deserialize;

use super::generate::Rng;
use crate::capture::sampling::DEFAULT_MAX_FRAMES_PER_SEC;

/// A scenario's `sampling`: the size of every packet (what turns Mbit/s into packets a second)
/// and the daemon's `max_frames_per_sec`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplingSpec {
    pub packet_bytes: f64,
    #[serde(default = "default_limit")]
    pub max_frames_per_sec: u32,
    #[serde(default)]
    pub seed: u64,
}

fn default_limit() -> u32 {
    DEFAULT_MAX_FRAMES_PER_SEC
}

/// The draws of what the sampled ports keep.
pub struct SampledCounting {
    packet_bits: f64,
    rng: Rng,
}

impl SampledCounting {
    pub fn new(spec: &SamplingSpec) -> Self {
        SampledCounting {
            packet_bits: spec.packet_bytes.max(1.0) * 8.0,
            // A stream of its own: sampling must not move the demands' or the shares' draws.
            rng: Rng::new(spec.seed ^ 0x5a3b_1e0f_c0ff_ee11),
        }
    }

    /// A client's rate (Mbit/s) on a port sampled one in `one_in` as counted: its packets of
    /// the second kept one in N, each counted N times.
    pub fn counted(&mut self, rate_mbps: f64, one_in: u32) -> f64 {
        let n = f64::from(one_in);
        if n <= 1.0 {
            return rate_mbps;
        }
        let packets = rate_mbps * 1e6 / self.packet_bits;
        let kept = self.binomial(packets, 1.0 / n);
        kept * n * self.packet_bits / 1e6
    }

    /// A draw of Binomial(`trials`, `p`): normal for a mean of 30 or more, else Poisson (the
    /// trials are many and `p` small wherever the mean is small).
    fn binomial(&mut self, trials: f64, p: f64) -> f64 {
        let mean = trials * p;
        if mean >= 30.0 {
            let sd = (mean * (1.0 - p)).sqrt();
            // Box-Muller.
            let (u, v) = (self.rng.unit().max(1e-12), self.rng.unit());
            let z = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
            return (mean + sd * z).round().clamp(0.0, trials.floor());
        }
        // Knuth's: count uniforms until their product falls under e^-mean.
        let (limit, mut product, mut k) = ((-mean).exp(), self.rng.unit(), 0.0);
        while product > limit {
            k += 1.0;
            product *= self.rng.unit();
        }
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sampled_port_estimates_its_clients_without_bias() {
        let spec = SamplingSpec {
            packet_bytes: 64.0,
            max_frames_per_sec: 100_000,
            seed: 7,
        };
        let mut c = SampledCounting::new(&spec);
        assert_eq!(c.counted(10.0, 1), 10.0);
        let n = 2000;
        let mean = (0..n).map(|_| c.counted(100.0, 32)).sum::<f64>() / f64::from(n);
        assert!((mean - 100.0).abs() < 0.5, "mean {mean}");
        // A small client: the Poisson branch, still unbiased.
        let small = (0..n).map(|_| c.counted(0.05, 32)).sum::<f64>() / f64::from(n);
        assert!((small - 0.05).abs() < 0.01, "mean {small}");
    }
}
