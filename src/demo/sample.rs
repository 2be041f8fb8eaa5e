//! Per-port receive rate of the lab server, sampled in a background thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::netns::{read_rx_bytes, Lab, LabResult};

/// One sample: the mean rate of each port (Mbit/s, in the lab's port order) over the period ending at
/// `t` seconds after the lab was built.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub t: f64,
    pub mbit: Vec<f64>,
}

/// A time series of samples for the ports in `ports`.
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub ports: Vec<String>,
    pub samples: Vec<Sample>,
}

impl Series {
    /// The mean rate of each port over samples with `from < t <= to`, or `None` if none.
    pub fn mean(&self, from: f64, to: f64) -> Option<Vec<f64>> {
        let inside: Vec<&Sample> = self
            .samples
            .iter()
            .filter(|s| s.t > from && s.t <= to)
            .collect();
        if inside.is_empty() {
            return None;
        }
        let n = inside.len() as f64;
        Some(
            (0..self.ports.len())
                .map(|i| {
                    inside
                        .iter()
                        .map(|s| s.mbit.get(i).copied().unwrap_or(0.0))
                        .sum::<f64>()
                        / n
                })
                .collect(),
        )
    }

    /// Appends another series of the same ports.
    pub fn extend(&mut self, other: Series) {
        if self.ports.is_empty() {
            self.ports = other.ports;
        }
        self.samples.extend(other.samples);
    }
}

/// Samples every port of the lab server every `period` until [`Sampler::finish`].
pub struct Sampler {
    ports: &'static [&'static str],
    stop: Arc<AtomicBool>,
    handle: JoinHandle<LabResult<Vec<Sample>>>,
}

impl Sampler {
    pub fn start(lab: &Lab, period: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let ns = lab.ns("srv");
        let t0 = lab.started();
        let flag = Arc::clone(&stop);
        let ports = lab.ports();
        let handle = std::thread::spawn(move || sample_loop(&ns, ports, t0, period, &flag));
        Sampler {
            ports,
            stop,
            handle,
        }
    }

    /// Stops sampling and returns the series.
    pub fn finish(self) -> LabResult<Series> {
        self.stop.store(true, Ordering::Relaxed);
        let samples = self
            .handle
            .join()
            .map_err(|_| "sampler thread panicked".to_string())??;
        Ok(Series {
            ports: self.ports.iter().map(|p| p.to_string()).collect(),
            samples,
        })
    }
}

fn sample_loop(
    ns: &str,
    ports: &[&str],
    t0: Instant,
    period: Duration,
    stop: &AtomicBool,
) -> LabResult<Vec<Sample>> {
    let global = super::netns::stop_flag();
    let mut samples = Vec::new();
    let mut last = (Instant::now(), read_rx_bytes(ns, ports)?);
    let mut next = last.0 + period;
    while !stop.load(Ordering::Relaxed) && !global.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(20)));
            continue;
        }
        next += period;
        let bytes = read_rx_bytes(ns, ports)?;
        let at = Instant::now();
        let dt = at.duration_since(last.0).as_secs_f64().max(1e-6);
        let mbit = bytes
            .iter()
            .zip(&last.1)
            .map(|(b, a)| b.saturating_sub(*a) as f64 * 8.0 / dt / 1e6)
            .collect();
        samples.push(Sample {
            t: at.duration_since(t0).as_secs_f64(),
            mbit,
        });
        last = (at, bytes);
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_over_window() {
        let s = Series {
            ports: vec!["p0".into(), "p1".into()],
            samples: vec![
                Sample {
                    t: 1.0,
                    mbit: vec![10.0, 0.0],
                },
                Sample {
                    t: 2.0,
                    mbit: vec![20.0, 4.0],
                },
                Sample {
                    t: 3.0,
                    mbit: vec![30.0, 8.0],
                },
            ],
        };
        assert_eq!(s.mean(1.0, 3.0), Some(vec![25.0, 6.0]));
        assert_eq!(s.mean(5.0, 6.0), None);
    }
}
