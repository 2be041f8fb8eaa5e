//! Choosing each port's sampling ratio: pure, no I/O and no clock (times are passed in, in
//! milliseconds on any monotonic clock, e.g. since the daemon started).
//!
//! The kernel keeps one IPv4/IPv6 frame in N on a port and counts it N times: the counting
//! program at the tc hooks (`ebpf/tc_program`), or the capture filter (`filter.rs`) before the
//! daemon counts each kept frame N times. So a busy port counts at most about
//! `max_frames_per_sec` frames a second one by one however fast it runs. N is a power of two
//! chosen from the port's receive packet rate (its kernel counter, read once a second):
//!
//! - **Up at once.** When the port's rate divided by N exceeds the limit, N becomes the smallest
//!   power of two that brings it under the limit. The daemon can also report the frames it is
//!   handed ([`Sampler::on_drained`]), so that a surge raises N within a tenth of a second
//!   instead of after the next counter reading.
//! - **Down slowly.** N is lowered only after [`DOWN_HOLD`] consecutive readings in which even
//!   the lowered ratio would hand over at most half the limit, to the highest ratio those
//!   readings call for. So a rate between a quarter of the limit and the limit (times N) keeps N
//!   where it is, and a bursty port does not flap.
//! - **Exact when quiet.** A port under the limit is counted exactly (N = 1), and with sampling
//!   off N is always 1.
//!
//! Accuracy: a client that sends `f` frames a second on a port sampled 1 in N is seen about
//! `f / N` times a second, and its estimated rate has a relative standard error of about
//! `sqrt(N / f)` (the count of kept frames is binomial); see rlbd(8).

use super::filter::MAX_SAMPLING;

/// Default `[capture] max_frames_per_sec`: frames a second a port counts one by one at most.
pub const DEFAULT_MAX_FRAMES_PER_SEC: u32 = 100_000;
/// Consecutive counter readings that must all allow a lower ratio before it is lowered.
pub const DOWN_HOLD: u32 = 5;
/// Counter readings closer than this make no rate (notifications carry counters at odd times).
const MIN_GAP_MS: u64 = 500;
/// The window over which [`Sampler::on_drained`] counts the frames handed over.
const FAST_WINDOW_MS: u64 = 100;
/// After a raise, how long the fast path waits: the ring is still full of frames kept under the
/// old ratio (8 MiB by default, tens of thousands of frames), and draining them is no surge.
const FAST_QUIET_MS: u64 = 1000;

/// The smallest power of two N (at most [`MAX_SAMPLING`]) with `frames_per_sec / N <= limit`.
pub fn ratio_for(frames_per_sec: f64, limit: f64) -> u32 {
    if !(frames_per_sec > limit && limit > 0.0) {
        return 1;
    }
    let need = (frames_per_sec / limit).ceil();
    if need >= f64::from(MAX_SAMPLING) {
        MAX_SAMPLING
    } else {
        (need as u32).next_power_of_two()
    }
}

/// One port's sampling ratio, kept in step with its packet rate. See the module documentation.
#[derive(Debug, Clone)]
pub struct Sampler {
    /// `None`: sampling off, always exact.
    limit: Option<u32>,
    ratio: u32,
    /// The previous counter reading.
    last: Option<(u64, u64)>,
    /// Consecutive readings that allowed a lower ratio, and the highest ratio they called for.
    calm: u32,
    calm_ratio: u32,
    /// Start of the current `on_drained` window and the frames handed over in it.
    window: Option<(u64, u64)>,
    /// No fast-path decision before this: right after a change the ring still holds frames kept
    /// under the old ratio, and draining them fast is no surge.
    fast_after: Option<u64>,
}

impl Sampler {
    /// A sampler handing over at most `limit` frames a second (`None`: never sample), starting
    /// exact.
    pub fn new(limit: Option<u32>) -> Self {
        Sampler {
            limit: limit.filter(|l| *l > 0),
            ratio: 1,
            last: None,
            calm: 0,
            calm_ratio: 1,
            window: None,
            fast_after: None,
        }
    }

    /// The ratio in force: one IPv4/IPv6 frame in this many is kept.
    pub fn ratio(&self) -> u32 {
        self.ratio
    }

    /// The frames a second the port may hand over (`None`: sampling off).
    pub fn limit(&self) -> Option<u32> {
        self.limit
    }

    /// Back to exact counting with no history, e.g. when the port's capture socket was
    /// re-opened (a new socket counts exactly).
    pub fn reset(&mut self) {
        *self = Sampler::new(self.limit);
    }

    /// A new limit (configuration reload). Returns the new ratio when it changes: off means
    /// exact at once; otherwise the next reading decides.
    pub fn set_limit(&mut self, limit: Option<u32>) -> Option<u32> {
        let limit = limit.filter(|l| *l > 0);
        if limit == self.limit {
            return None;
        }
        self.limit = limit;
        self.calm = 0;
        self.calm_ratio = 1;
        if limit.is_none() && self.ratio != 1 {
            self.ratio = 1;
            return Some(1);
        }
        None
    }

    /// Feeds the port's receive packet counter as read at `at_ms`. Returns the new ratio when it
    /// changes. A counter that went backwards (device reset) starts over without a decision.
    pub fn on_counter(&mut self, at_ms: u64, rx_packets: u64) -> Option<u32> {
        let limit = f64::from(self.limit?);
        let Some((t0, p0)) = self.last else {
            self.last = Some((at_ms, rx_packets));
            return None;
        };
        let dt = at_ms.saturating_sub(t0);
        if dt < MIN_GAP_MS {
            return None;
        }
        self.last = Some((at_ms, rx_packets));
        let delta = rx_packets.checked_sub(p0)?;
        let pps = delta as f64 * 1000.0 / dt as f64;
        self.decide(at_ms, pps, limit)
    }

    fn decide(&mut self, at_ms: u64, pps: f64, limit: f64) -> Option<u32> {
        let up = ratio_for(pps, limit);
        if up > self.ratio {
            self.calm = 0;
            self.calm_ratio = 1;
            self.fast_after = Some(at_ms + FAST_QUIET_MS);
            return self.change(up);
        }
        let down = ratio_for(pps, limit / 2.0);
        if down >= self.ratio {
            self.calm = 0;
            self.calm_ratio = 1;
            return None;
        }
        self.calm += 1;
        self.calm_ratio = self.calm_ratio.max(down);
        if self.calm < DOWN_HOLD {
            return None;
        }
        let to = self.calm_ratio;
        self.calm = 0;
        self.calm_ratio = 1;
        self.change(to)
    }

    fn change(&mut self, to: u32) -> Option<u32> {
        (to != self.ratio).then(|| {
            self.ratio = to;
            to
        })
    }

    /// Counts `frames` handed to the daemon at `at_ms` (call after each drain). When the frames
    /// of the last tenth of a second, times the ratio, run at more than twice the limit, raises
    /// the ratio at once and returns it; the next counter readings refine it.
    pub fn on_drained(&mut self, at_ms: u64, frames: usize) -> Option<u32> {
        let limit = f64::from(self.limit?);
        if self.fast_after.is_some_and(|t| at_ms < t) {
            self.window = None;
            return None;
        }
        // The frames of a call were drained since the previous one: a window starts empty.
        let Some((start, seen)) = self.window else {
            self.window = Some((at_ms, 0));
            return None;
        };
        let seen = seen + frames as u64;
        let elapsed = at_ms.saturating_sub(start);
        if elapsed < FAST_WINDOW_MS {
            self.window = Some((start, seen));
            return None;
        }
        self.window = Some((at_ms, 0));
        let handed = seen as f64 * 1000.0 / elapsed as f64;
        if handed <= 2.0 * limit {
            return None;
        }
        let to = ratio_for(handed * f64::from(self.ratio), limit);
        self.calm = 0;
        self.calm_ratio = 1;
        if to > self.ratio {
            self.fast_after = Some(at_ms + FAST_QUIET_MS);
            self.change(to)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests;
