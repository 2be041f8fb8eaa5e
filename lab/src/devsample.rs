//! Goodput of a namespace lab's ports, sampled from `/proc/PID/net/dev` of a process in the
//! server's namespace: reading a file spawns no process per sample, so a busy machine does not
//! smear the samples' timing.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::netns::LabResult;

/// Samples the sum of the ports' rx counters from a `/proc/PID/net/dev` in a thread.
pub struct DevSampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<LabResult<Vec<(Instant, u64)>>>,
}

impl DevSampler {
    pub fn start(dev: &Path, ports: &[&str], period: Duration) -> LabResult<Self> {
        let dev = dev.to_path_buf();
        let ports: Vec<String> = ports.iter().map(|p| p.to_string()).collect();
        read_dev(&dev, &ports)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let global = super::netns::stop_flag();
        let handle = std::thread::spawn(move || {
            let mut out = Vec::new();
            let mut next = Instant::now();
            while !flag.load(Ordering::Relaxed) && !global.load(Ordering::Relaxed) {
                let now = Instant::now();
                if now < next {
                    std::thread::sleep((next - now).min(Duration::from_millis(10)));
                    continue;
                }
                next += period;
                out.push((Instant::now(), read_dev(&dev, &ports)?));
            }
            Ok(out)
        });
        Ok(Self { stop, handle })
    }

    /// Stops; returns (seconds after `t0`, Mbit/s over the period ending then).
    pub fn finish(self, t0: Instant) -> LabResult<Vec<(f64, f64)>> {
        self.stop.store(true, Ordering::Relaxed);
        let raw = self
            .handle
            .join()
            .map_err(|_| "sampler thread panicked".to_string())??;
        Ok(raw
            .windows(2)
            .map(|w| {
                let dt = w[1].0.duration_since(w[0].0).as_secs_f64().max(1e-6);
                let mbit = w[1].1.saturating_sub(w[0].1) as f64 * 8.0 / dt / 1e6;
                (w[1].0.saturating_duration_since(t0).as_secs_f64(), mbit)
            })
            .collect())
    }
}

/// The sum of the rx bytes of `ports` in a `/proc/net/dev` text.
fn read_dev(dev: &Path, ports: &[String]) -> LabResult<u64> {
    let text =
        std::fs::read_to_string(dev).map_err(|e| format!("cannot read {}: {e}", dev.display()))?;
    sum_rx(&text, ports).ok_or_else(|| format!("{}: not every one of {ports:?}", dev.display()))
}

fn sum_rx(text: &str, ports: &[String]) -> Option<u64> {
    let mut sum = 0;
    for p in ports {
        let line = text.lines().find(|l| {
            l.trim_start()
                .strip_prefix(p.as_str())
                .is_some_and(|r| r.starts_with(':'))
        })?;
        let rx: u64 = line
            .split(':')
            .nth(1)?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        sum += rx;
    }
    Some(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_dev_is_summed_over_the_ports() {
        let text = "Inter-|   Receive  |  Transmit\n face |bytes    packets\n\
                        lo:     100       1    0    0\n\
                        p0: 1000 10 0 0 0 0 0 0 5 1\n\
                        p1:2000 20 0 0 0 0 0 0 5 1\n\
                        p10: 9 1 0 0\n";
        let ports = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(sum_rx(text, &ports(&["p0", "p1"])), Some(3000));
        assert_eq!(sum_rx(text, &ports(&["p1"])), Some(2000));
        assert_eq!(sum_rx(text, &ports(&["p2"])), None);
    }
}
