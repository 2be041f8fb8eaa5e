//! The sampled estimator's accuracy per second at real port speeds, modelled: a full port of
//! 1,500-byte frames, its clients' frames kept one in N independently (as the kernel's `ld rand`
//! does), each client's rate estimated every second as kept frames times size times N, and
//! compared with its exact rate. N is what the sampling policy picks for the port's rate.

use rlbd::capture::sampling::ratio_for;

/// splitmix64, seeded: the same stream on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
}

/// Frames kept out of `frames`, each with probability 1/n: the gaps between kept frames are
/// geometric, so the cost is the number kept, not the number sent.
fn kept(frames: u64, n: u32, rng: &mut Rng) -> u64 {
    if n == 1 {
        return frames;
    }
    let q = (1.0 - 1.0 / f64::from(n)).ln();
    let (mut i, mut k) = (0u64, 0u64);
    loop {
        i += (rng.unit().ln() / q).floor() as u64;
        if i >= frames {
            return k;
        }
        k += 1;
        i += 1;
    }
}

/// Shares of the port's capacity of the clients that are judged (every one at least 1%).
const SHARES: [f64; 19] = [
    0.20, 0.10, 0.08, 0.05, 0.05, 0.03, 0.03, 0.02, 0.02, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01,
    0.01, 0.01, 0.01,
];
const FRAME: f64 = 1500.0;
const SECONDS: usize = 30;

/// The 95th percentile of the per-second relative errors of clients whose share is at least
/// `min_share`, at sampling ratio `n`, on a port of `gbps` full of 1500-byte frames.
fn p95(gbps: f64, n: u32, min_share: f64, seed: u64) -> f64 {
    let mut rng = Rng(seed);
    let cap_fps = gbps * 1e9 / 8.0 / FRAME;
    let mut errs = Vec::new();
    for _ in 0..SECONDS {
        for share in SHARES.iter().filter(|s| **s >= min_share) {
            let frames = (share * cap_fps).round() as u64;
            let est = kept(frames, n, &mut rng) * u64::from(n);
            errs.push((est as f64 - frames as f64).abs() / frames as f64);
        }
    }
    errs.sort_by(f64::total_cmp);
    errs[(errs.len() * 95).div_ceil(100) - 1] * 100.0
}

/// Prints the modelled errors for 10, 25 and 100 GbE ports, 95% full, at each limit.
pub fn print(limits: &[u32]) {
    println!(
        "\nsampling accuracy per second, modelled: a 95%-full port of 1500-byte frames, clients \
         of 1-20% of its capacity, {SECONDS} s; 95th percentile of |estimate - exact| / exact"
    );
    println!(
        "  {:>14} {:>8} {:>6} {:>10} {:>12} {:>12} {:>12}",
        "frames/s max", "port", "1 in", "kept/s", ">= 1% cap", ">= 5% cap", ">= 10% cap"
    );
    for &limit in limits {
        for gbps in [10.0, 25.0, 100.0] {
            let fps = gbps * 1e9 / 8.0 / FRAME * 0.95;
            let n = ratio_for(fps, f64::from(limit));
            println!(
                "  {:>14} {:>5} GbE {:>6} {:>10.0} {:>11.2}% {:>11.2}% {:>11.2}%",
                limit,
                gbps,
                n,
                fps / f64::from(n),
                p95(gbps, n, 0.01, 1),
                p95(gbps, n, 0.05, 2),
                p95(gbps, n, 0.10, 3)
            );
        }
    }
}
