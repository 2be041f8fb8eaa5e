//! A reload (SIGHUP, or `rlbd reload` over the control socket): the configuration read again
//! and applied to every part that holds a copy of it, keeping all state (moves, rates, the
//! client table). The bond or ports and the capture table and ring sizes need a restart. A bad
//! file changes nothing: the daemon runs on with the settings it had.

use log::{debug, error, info, warn};

use super::{setup, Daemon};
use crate::config::Settings;

/// CLOCK_MONOTONIC in microseconds, as systemd's `MONOTONIC_USEC=` wants it.
fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// The notification that starts a reload. systemd 253 and later (`Type=notify-reload`) match
/// it to the reload they asked for by the time; older ones ignore the time.
fn reloading(usec: u64) -> String {
    format!("RELOADING=1\nMONOTONIC_USEC={usec}\nSTATUS=reloading the configuration")
}

impl Daemon {
    /// A reload under systemd's reload protocol: `RELOADING=1` before, `READY=1` after, bad
    /// file or not (the daemon runs on either way). `why`: "SIGHUP" or "reload request", for
    /// the log. `Ok`: what was done; `Err`: why nothing was.
    pub(super) fn reload(&mut self, why: &str) -> Result<String, String> {
        setup::sd_notify(&reloading(monotonic_usec()));
        let result = self.reload_config(why);
        setup::sd_notify(&format!("READY=1\nSTATUS={}", self.summary()));
        result
    }

    fn reload_config(&mut self, why: &str) -> Result<String, String> {
        let new = match (self.reload)() {
            Ok(new) => new,
            Err(e) => {
                let why_not =
                    format!("configuration not reloaded: {e}; running on with the settings it had");
                error!("{why}: {why_not}");
                return Err(why_not);
            }
        };
        // What the new file changes that only a restart applies.
        let mut restart = Vec::new();
        if new.target != self.settings.target && new.target.is_some() {
            restart.push("the bond or ports");
        }
        let old = &self.settings.capture;
        if (old.table_size, old.ring_blocks, old.ring_block_kib)
            != (
                new.capture.table_size,
                new.capture.ring_blocks,
                new.capture.ring_block_kib,
            )
        {
            restart.push("the capture table or ring size");
        }
        if old.kernel_counting() != new.capture.kernel_counting() {
            restart.push("[capture] counting");
        }
        for what in &restart {
            warn!("{why}: {what} changed in the configuration; restart rlbd to apply that");
        }
        self.ports.set_window(new.policy.window, new.policy.hits);
        self.ports.capacity_mbps = new
            .capacity_mbps
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        for i in 0..self.ports.list.len() {
            let name = self.ports.list[i].name.clone();
            if let Some(c) = self.ports.capacity_override(&name) {
                self.ports.list[i].capacity_bps = c;
            }
        }
        self.table.set_idle_ticks(new.capture.idle_timeout_secs);
        self.captures
            .set_sampling_limit(&self.ports, new.capture.sampling_limit());
        crate::logging::set_level(&new.log_level);
        // The target stays what the daemon runs on (a change of it needs a restart), and the
        // steering core's settings follow from it.
        self.settings = Settings {
            target: self.settings.target.clone(),
            ..new
        };
        self.steer
            .reconfigure(super::setup::steer_config(&self.settings));
        let from = self
            .settings
            .config_path
            .as_ref()
            .map_or_else(|| "built-in defaults".into(), |p| p.display().to_string());
        info!("{why}: configuration reloaded from {from}; state kept");
        // Read back from the parts that hold them, so a test can see the reload reached each.
        debug!(
            "now: log level {}; client table idle timeout {} s, moves forgotten after {} s idle; {:?}; {:?}",
            log::max_level(),
            self.table.idle_ticks(),
            self.steer.config().idle_ms / 1000,
            self.settings.policy,
            self.settings.steering
        );
        Ok(match restart.as_slice() {
            [] => format!("configuration reloaded from {from}; state kept"),
            r => format!(
                "configuration reloaded from {from}; state kept; changed but applied only by a \
                 restart: {}",
                r.join(", ")
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_reloading_notification_carries_the_monotonic_time() {
        let a = super::monotonic_usec();
        let b = super::monotonic_usec();
        assert!(a > 0 && b >= a);
        assert_eq!(
            super::reloading(123),
            "RELOADING=1\nMONOTONIC_USEC=123\nSTATUS=reloading the configuration"
        );
    }
}
