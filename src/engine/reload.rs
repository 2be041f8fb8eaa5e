//! A reload: new settings handed to every part that holds a copy of them, keeping all state,
//! and the answer to whoever asked. What a reload cannot apply (the bond or ports, the capture
//! table and ring sizes and the way ports count are sized or opened at start) is said, not
//! applied. And the steering core's settings, which a reload hands on.

use log::Level;

use super::io::{Output, Topic};
use super::Engine;
use crate::config::{Settings, Target};
use crate::steer::RulesOff;

impl Engine {
    /// New settings (a reload), applied to every part that holds a copy of them, keeping all
    /// state. The bond or ports stay what the daemon runs on. Settings with a pin to a port
    /// that is not one are refused whole: the old ones stay.
    pub(super) fn reload(&mut self, new: Settings, why: &str) {
        if let Some(e) = self.pins_refused(&new.clients) {
            return self.refuse_reload(why, &e.to_string());
        }
        let restart = restart_needed(&self.settings, &new);
        let from = new
            .config_path
            .as_ref()
            .map_or_else(|| "built-in defaults".into(), |p| p.display().to_string());
        // First, so that the shell's log level is the new one for what follows.
        self.out
            .push(Output::Reloaded(Ok(reload_answer(&from, &restart))));
        let limit = new.capture.sampling_limit();
        self.counting
            .set_limit(limit, self.lan.refs(), &mut self.out);
        for what in restart {
            let text =
                format!("{why}: {what} changed in the configuration; restart rlbd to apply that");
            self.out.log(Level::Warn, Topic::Config, text);
        }
        self.lan.reconfigure(&new);
        self.table.set_idle_ticks(new.capture.idle_timeout_secs);
        self.settings = Settings {
            target: self.settings.target.clone(),
            ..new
        };
        self.steer
            .reconfigure(steer_config(&self.settings, self.rules_off));
        let hold = self.settings.policy.hold_down;
        let guests = self.settings.guests.clone();
        self.guests
            .reconfigure(guests, hold, &mut self.guest_actions);
        self.guests_topology();
        let text = format!("{why}: configuration reloaded from {from}; state kept");
        self.out.log(Level::Info, Topic::Config, text);
        // Read back from the parts that hold them, so a test can see the reload reached each.
        let text = format!(
            "now: log level {}; client table idle timeout {} s, moves forgotten after {} s idle; {:?}; {:?}",
            self.settings.log_level.to_uppercase(),
            self.table.idle_ticks(),
            self.steer.config().idle_ms / 1000,
            self.settings.policy,
            self.settings.steering
        );
        self.out.log(Level::Debug, Topic::Config, text);
    }

    /// A reload refused (a file that would not parse, a pin to no port): nothing changes, and
    /// the asker is told why.
    pub(super) fn refuse_reload(&mut self, why: &str, error: &str) {
        let why_not =
            format!("configuration not reloaded: {error}; running on with the settings it had");
        let text = format!("{why}: {why_not}");
        let fields = crate::logging::Fields::config_refused();
        self.out.log_with(Level::Error, Topic::Config, text, fields);
        self.out.push(Output::Reloaded(Err(why_not)));
    }
}

/// The answer to a reload: what was done (reloaded from `from`), and what only a restart
/// applies.
pub fn reload_answer(from: &str, restart: &[&str]) -> String {
    match restart {
        [] => format!("configuration reloaded from {from}; state kept"),
        r => format!(
            "configuration reloaded from {from}; state kept; changed but applied only by a \
             restart: {}",
            r.join(", ")
        ),
    }
}

/// What changed from `old` to `new` that only a restart applies, in words.
pub fn restart_needed(old: &Settings, new: &Settings) -> Vec<&'static str> {
    let mut v = Vec::new();
    if new.target != old.target && new.target.is_some() {
        v.push("the bond or ports");
    }
    let (o, n) = (&old.capture, &new.capture);
    if (o.table_size, o.ring_blocks, o.ring_block_kib)
        != (n.table_size, n.ring_blocks, n.ring_block_kib)
    {
        v.push("the capture table or ring size");
    }
    if o.kernel_counting() != n.kernel_counting() {
        v.push("[capture] counting");
    }
    v
}

/// The steering core's settings, from the daemon's and the rules switched off.
pub fn steer_config(s: &Settings, rules_off: RulesOff) -> crate::steer::SteerConfig {
    let doubled = if rules_off.weakened(crate::steer::Weakening::LimitsDoubled) {
        2
    } else {
        1
    };
    crate::steer::SteerConfig {
        policy: s.policy.clone(),
        repeats: s.steering.repeats,
        repeat_interval_ms: s.steering.repeat_interval_ms,
        reassert_delay_ms: s.steering.reassert_delay_ms,
        per_client_per_sec: s.steering.per_client_per_sec.saturating_mul(doubled),
        total_per_sec: s.steering.total_per_sec.saturating_mul(doubled),
        idle_ms: s.capture.idle_timeout_secs.saturating_mul(1000),
        dry_run: s.dry_run,
        max_moved: s.capture.table_size,
        // A bond's driver keeps the clients it answered itself (balance-alb re-steers them off
        // a failed slave; balance-tlb answers with a MAC that moves with the active slave).
        follow_answers: matches!(s.target, Some(Target::Ports(_))),
        clients: crate::config::ClientRules::new(&s.clients),
        rules_off,
    }
}

/// Why `clients`' pins cannot stand on `ports` (a pin to a port that is not one); `None` while
/// a bond has no slaves yet.
pub fn pins_refused(
    ports: &crate::host::PortTable,
    clients: &crate::config::ClientsConfig,
) -> Option<crate::config::ConfigError> {
    let names: Vec<String> = ports.list.iter().map(|p| p.name.clone()).collect();
    if names.is_empty() {
        return None;
    }
    clients.check_ports(&names).err()
}
