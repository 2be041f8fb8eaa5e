//! New settings (a reload), applied to every part of the engine that holds a copy of them,
//! keeping all state. The bond or ports, the capture table and ring sizes and the way ports
//! count need a restart: said, not applied.

use log::Level;

use super::{Engine, Topic};
use crate::config::Settings;

impl Engine {
    pub(super) fn reload(&mut self, _now: u64, new: Settings) {
        let mut restart = Vec::new();
        if new.target != self.settings.target && new.target.is_some() {
            restart.push("the bond or ports changed in the configuration");
        }
        let old = &self.settings.capture;
        if (old.table_size, old.ring_blocks, old.ring_block_kib)
            != (
                new.capture.table_size,
                new.capture.ring_blocks,
                new.capture.ring_block_kib,
            )
        {
            restart.push("the capture table or ring size changed");
        }
        if old.kernel_counting() != new.capture.kernel_counting() {
            restart.push("[capture] counting changed");
        }
        for what in restart {
            let text = format!("SIGHUP: {what}; restart rlbd to apply that");
            self.log(Level::Warn, Topic::Config, text);
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
        // The target stays what the daemon runs on (a change of it needs a restart), and the
        // steering core's settings follow from it.
        self.settings = Settings {
            target: self.settings.target.clone(),
            ..new
        };
        self.steer.reconfigure(self.steer_config());
        self.log(
            Level::Info,
            Topic::Config,
            "SIGHUP: configuration reloaded; state kept".into(),
        );
        // Read back from the parts that hold them, so a test can see the reload reached each.
        let text = format!(
            "now: log level {}; client table idle timeout {} s, moves forgotten after {} s idle; {:?}; {:?}",
            self.settings.log_level.to_uppercase(),
            self.table.idle_ticks(),
            self.steer.config().idle_ms / 1000,
            self.settings.policy,
            self.settings.steering
        );
        self.log(Level::Debug, Topic::Config, text);
    }
}
