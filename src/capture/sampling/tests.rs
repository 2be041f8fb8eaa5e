//! Tests of `sampling.rs`: the ratio policy, and the sampled estimator's accuracy against exact
//! counts on a seeded random stream.

use super::*;

fn secs(t0: u64, s: f64) -> u64 {
    t0 + (s * 1000.0).round() as u64
}

/// Feeds one reading a second at `pps` frames a second from second `from` for `n` seconds;
/// returns the ratio after each reading.
fn feed(s: &mut Sampler, t0: u64, counter: &mut u64, from: u64, n: u64, pps: u64) -> Vec<u32> {
    (from..from + n)
        .map(|i| {
            *counter += pps;
            s.on_counter(secs(t0, i as f64), *counter);
            s.ratio()
        })
        .collect()
}

#[test]
fn ratio_for_is_the_smallest_power_of_two_under_the_limit() {
    assert_eq!(ratio_for(0.0, 1000.0), 1);
    assert_eq!(ratio_for(1000.0, 1000.0), 1);
    assert_eq!(ratio_for(1001.0, 1000.0), 2);
    assert_eq!(ratio_for(4000.0, 1000.0), 4);
    assert_eq!(ratio_for(4001.0, 1000.0), 8);
    assert_eq!(ratio_for(2.0e6, 100_000.0), 32);
    assert_eq!(ratio_for(1e12, 1.0), MAX_SAMPLING);
    assert_eq!(ratio_for(f64::NAN, 1000.0), 1);
    assert_eq!(ratio_for(5000.0, 0.0), 1);
}

#[test]
fn exact_until_the_limit_then_up_at_once() {
    let t0 = 1_000u64;
    let mut s = Sampler::new(Some(10_000));
    let mut c = 0;
    // The first reading makes no rate; quiet traffic stays exact.
    assert_eq!(feed(&mut s, t0, &mut c, 0, 4, 9_000), vec![1; 4]);
    // Over the limit: the next reading raises N straight to what the rate needs.
    assert_eq!(s.on_counter(secs(t0, 4.0), c + 1_000_000), Some(128));
    assert_eq!(s.ratio(), 128);
    c += 1_000_000;
    assert_eq!(feed(&mut s, t0, &mut c, 5, 3, 1_000_000), vec![128; 3]);
}

#[test]
fn down_only_after_a_calm_hold_and_never_flapping() {
    let t0 = 1_000u64;
    let mut s = Sampler::new(Some(10_000));
    let mut c = 0;
    feed(&mut s, t0, &mut c, 0, 2, 640_000);
    assert_eq!(s.ratio(), 64);
    // Anywhere from a quarter of the limit to the limit (times N): N stays.
    let band = [
        160_001, 640_000, 300_000, 200_000, 639_000, 170_000, 500_000,
    ];
    for (i, pps) in band.iter().enumerate() {
        feed(&mut s, t0, &mut c, 2 + i as u64, 1, *pps);
        assert_eq!(s.ratio(), 64, "{pps} frames/s");
    }
    // Lower: DOWN_HOLD readings first, then the highest ratio those readings called for.
    let mut at = 2 + band.len() as u64;
    let calm = [40_000u64, 60_000, 20_000, 50_000, 30_000];
    for (i, pps) in calm.iter().enumerate() {
        feed(&mut s, t0, &mut c, at, 1, *pps);
        at += 1;
        let want = if i + 1 < DOWN_HOLD as usize { 64 } else { 16 };
        assert_eq!(s.ratio(), want, "after calm reading {i}");
    }
    // A burst inside the hold restarts it.
    feed(&mut s, t0, &mut c, at, 4, 1_000);
    feed(&mut s, t0, &mut c, at + 4, 1, 100_000);
    assert_eq!(s.ratio(), 16);
    feed(&mut s, t0, &mut c, at + 5, DOWN_HOLD.into(), 1_000);
    assert_eq!(s.ratio(), 1, "quiet again: exact");
}

#[test]
fn off_gaps_and_resets() {
    let t0 = 1_000u64;
    let mut off = Sampler::new(None);
    let mut c = 0;
    assert_eq!(feed(&mut off, t0, &mut c, 0, 3, 50_000_000), vec![1; 3]);
    assert_eq!(off.on_drained(secs(t0, 4.0), 1 << 20), None);
    assert_eq!(Sampler::new(Some(0)).limit(), None);

    let mut s = Sampler::new(Some(1000));
    assert_eq!(s.on_counter(t0, 100), None);
    // Closer than MIN_GAP: no rate, whatever the counter says.
    assert_eq!(s.on_counter(secs(t0, 0.2), 1_000_000), None);
    assert_eq!(s.ratio(), 1);
    // A counter that went backwards (device reset) makes no decision and starts over.
    assert_eq!(s.on_counter(secs(t0, 1.0), 5), None);
    assert_eq!(s.on_counter(secs(t0, 2.0), 4_005), Some(4));
    // A long gap averages over it: 50,000 frames in 10 s.
    assert_eq!(s.on_counter(secs(t0, 12.0), 54_005), Some(8));
    s.reset();
    assert_eq!(s.ratio(), 1);
    assert_eq!(s.set_limit(Some(1000)), None);
    feed(&mut s, t0, &mut c, 20, 2, 8_000);
    assert_eq!(s.ratio(), 8);
    assert_eq!(s.set_limit(None), Some(1), "off: exact at once");
    assert_eq!(
        s.set_limit(Some(500)),
        None,
        "on again: the next reading decides"
    );
}

#[test]
fn a_surge_raises_the_ratio_within_a_tenth_of_a_second() {
    let t0 = 1_000u64;
    let mut s = Sampler::new(Some(10_000));
    // 1000 frames per 10 ms drain = 100k/s handed over at N = 1: ten times the limit.
    let mut got = None;
    for i in 0..=10u32 {
        if let Some(r) = s.on_drained(secs(t0, f64::from(i) * 0.01), 1000) {
            got = Some((i, r));
            break;
        }
    }
    assert_eq!(got, Some((10, 16)));
    // Draining the backlog kept under the old ratio is no new surge.
    for i in 11..=100u32 {
        assert_eq!(s.on_drained(secs(t0, f64::from(i) * 0.01), 1000), None);
    }
    // Under twice the limit: the counters decide, not the fast path.
    let mut s = Sampler::new(Some(10_000));
    for i in 0..=50u32 {
        assert_eq!(s.on_drained(secs(t0, f64::from(i) * 0.01), 190), None);
    }
}

/// splitmix64: a small seeded generator, so the stream is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// One second of a port: each client's frames (count, size), sampled 1 in `n` frame by frame
/// the way the kernel does it (an independent uniform draw masked to n - 1, so the order the
/// clients' frames arrive in does not matter); returns each client's estimated bytes (kept
/// frames times size times n).
fn sampled_second(clients: &[(u64, u32)], n: u32, rng: &mut Rng) -> Vec<u64> {
    clients
        .iter()
        .map(|&(frames, size)| {
            let kept = (0..frames)
                .filter(|_| rng.next() as u32 & (n - 1) == 0)
                .count() as u64;
            kept * u64::from(size) * u64::from(n)
        })
        .collect()
}

/// The 95th percentile of the per-client, per-second relative errors of the sampled estimate,
/// and the mean signed error, over `seconds` seconds.
fn errors(clients: &[(u64, u32)], n: u32, seconds: usize, seed: u64) -> (f64, f64) {
    let mut rng = Rng(seed);
    let mut rel = Vec::new();
    for _ in 0..seconds {
        let est = sampled_second(clients, n, &mut rng);
        for (c, e) in clients.iter().zip(est) {
            let exact = c.0 as f64 * f64::from(c.1);
            rel.push((e as f64 - exact) / exact);
        }
    }
    let mean = rel.iter().sum::<f64>() / rel.len() as f64;
    let mut abs: Vec<f64> = rel.iter().map(|r| r.abs()).collect();
    abs.sort_by(f64::total_cmp);
    (abs[(abs.len() * 95).div_ceil(100) - 1], mean)
}

#[test]
fn sampled_estimate_is_unbiased_and_within_its_binomial_error() {
    // Five clients of one port, 1500-byte frames; the smallest sends 2000 frames a second.
    // Sampled 1 in 8 it is seen ~250 times a second: relative standard error sqrt(8/2000) =
    // 6.3%, so the 95th percentile of |error| is near 1.96 * 6.3% = 12%.
    let clients = [
        (2000, 1500),
        (4000, 1500),
        (8000, 1500),
        (16000, 1500),
        (2000, 64),
    ];
    let (p95, mean) = errors(&clients, 8, 40, 0x5eed);
    let bound = 1.96 * (8.0f64 / 2000.0).sqrt();
    assert!(p95 <= bound * 1.25, "p95 {p95:.4} over {bound:.4}");
    assert!(p95 >= bound * 0.3, "p95 {p95:.4} implausibly small");
    assert!(mean.abs() < 0.01, "biased: mean error {mean:.4}");
    // Exact counting is exact.
    assert_eq!(errors(&clients, 1, 3, 1), (0.0, 0.0));
    // Four times the samples halve the error.
    let (p95_2, _) = errors(&clients, 2, 40, 0x5eed);
    assert!(p95_2 < p95 * 0.7, "{p95_2:.4} vs {p95:.4}");
}
