//! What the daemon reads of each client's rate when a busy port is sampled (a scenario's
//! `sampling`): each port's ratio chosen by the daemon's own [`Sampler`] from the packets the
//! port received, and each client's packets of a second kept one in N at random and counted N
//! times, as the kernel's program counts them. Without `sampling` every packet is counted.

use serde::Deserialize;

use super::generate::Rng;
use crate::capture::sampling::{Sampler, DEFAULT_MAX_FRAMES_PER_SEC};

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

/// The ports' samplers and the draws of what they keep.
pub struct SampledCounting {
    packet_bits: f64,
    samplers: Vec<Sampler>,
    packets: Vec<f64>,
    rng: Rng,
}

impl SampledCounting {
    pub fn new(spec: &SamplingSpec, ports: usize) -> Self {
        SampledCounting {
            packet_bits: spec.packet_bytes.max(1.0) * 8.0,
            samplers: vec![Sampler::new(Some(spec.max_frames_per_sec)); ports],
            packets: vec![0.0; ports],
            // A stream of its own: sampling must not move the demands' or the shares' draws.
            rng: Rng::new(spec.seed ^ 0x5a3b_1e0f_c0ff_ee11),
        }
    }

    /// The second `t`'s receive rates (Mbit/s): each port's packet counter, read by its
    /// sampler at the second's end, as the daemon reads it.
    pub fn on_second(&mut self, t: u64, rx_mbps: &[f64]) {
        for (p, rx) in rx_mbps.iter().enumerate() {
            self.packets[p] += rx * 1e6 / self.packet_bits;
            self.samplers[p].on_counter((t + 1) * 1000, self.packets[p] as u64);
        }
    }

    /// Port `p`'s resolution for the planner, as the engine computes it from its counters.
    pub fn resolution_bps(&self, p: usize) -> f64 {
        crate::policy::sampling_resolution_bps(self.one_in(p), self.packet_bits)
    }

    /// Port `p`'s ratio now.
    pub fn one_in(&self, p: usize) -> u32 {
        self.samplers[p].ratio()
    }

    /// A client's rate (Mbit/s) on port `p` as counted: its packets of the second kept one in
    /// N, each counted N times.
    pub fn counted(&mut self, p: usize, rate_mbps: f64) -> f64 {
        let n = f64::from(self.one_in(p));
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
    fn a_busy_port_is_sampled_and_its_clients_estimated_without_bias() {
        let spec = SamplingSpec {
            packet_bytes: 64.0,
            max_frames_per_sec: 100_000,
            seed: 7,
        };
        let mut c = SampledCounting::new(&spec, 2);
        // 1 Gbit/s of 64-byte packets: 1.95 million a second, one in 32 at the default.
        for t in 0..3 {
            c.on_second(t, &[1000.0, 10.0]);
        }
        assert_eq!((c.one_in(0), c.one_in(1)), (32, 1));
        assert_eq!(c.counted(1, 10.0), 10.0);
        let n = 2000;
        let mean = (0..n).map(|_| c.counted(0, 100.0)).sum::<f64>() / f64::from(n);
        assert!((mean - 100.0).abs() < 0.5, "mean {mean}");
        // A small client: the Poisson branch, still unbiased.
        let small = (0..n).map(|_| c.counted(0, 0.05)).sum::<f64>() / f64::from(n);
        assert!((small - 0.05).abs() < 0.01, "mean {small}");
    }
}
