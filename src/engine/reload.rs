//! What a reload cannot apply: the bond or ports, the capture table and ring sizes and the way
//! ports count are sized or opened at start; a change of them is said, not applied. And the
//! steering core's settings, which a reload hands on.

use crate::config::{Settings, Target};
use crate::steer::RulesOff;

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
