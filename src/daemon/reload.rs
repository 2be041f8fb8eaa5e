//! SIGHUP: the configuration read again and applied to every part that holds a copy of it,
//! keeping all state (moves, rates, the client table). The bond or ports and the capture table
//! and ring sizes need a restart.

use log::{debug, error, info, warn};

use super::Daemon;
use crate::config::Settings;

impl Daemon {
    pub(super) fn reload_config(&mut self) {
        let new = match (self.reload)() {
            Ok(new) => new,
            Err(e) => {
                error!("SIGHUP: configuration not reloaded: {e}");
                return;
            }
        };
        if new.target != self.settings.target && new.target.is_some() {
            warn!("SIGHUP: the bond or ports changed in the configuration; restart rlbd to apply that");
        }
        let old = &self.settings.capture;
        if (old.table_size, old.ring_blocks, old.ring_block_kib)
            != (
                new.capture.table_size,
                new.capture.ring_blocks,
                new.capture.ring_block_kib,
            )
        {
            warn!("SIGHUP: the capture table or ring size changed; restart rlbd to apply that");
        }
        if old.kernel_counting() != new.capture.kernel_counting() {
            warn!("SIGHUP: [capture] counting changed; restart rlbd to apply that");
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
        info!("SIGHUP: configuration reloaded; state kept");
        // Read back from the parts that hold them, so a test can see the reload reached each.
        debug!(
            "now: log level {}; client table idle timeout {} s, moves forgotten after {} s idle; {:?}; {:?}",
            log::max_level(),
            self.table.idle_ticks(),
            self.steer.config().idle_ms / 1000,
            self.settings.policy,
            self.settings.steering
        );
    }
}
