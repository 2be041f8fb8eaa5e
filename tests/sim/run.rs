//! One run: the simulated seconds, the chaos between them, and the report of a failure.

use rlbd::engine::Input;
use rlbd::Mac;

use super::balance::CALM_MS;
use super::checks::Check;
use super::driver::Driver;
use super::server_arp::server_arp;
use super::setup::{Fault, Faults, Setup};
use rlbd::simulate::lan::clients::{arp_frame, BROADCAST, SERVER};

const PORTS: usize = 4;
const HOUR: f64 = 3600.0;

/// A failed run: when, which rule and the last events.
#[derive(Debug)]
pub struct Failure {
    pub at_ms: u64,
    /// The check that caught it.
    pub check: Check,
    pub why: String,
    pub trace: String,
}

impl Failure {
    pub fn text(&self, setup: &Setup) -> String {
        format!(
            "simulation failed: seed {} ({}), at {} ms, check {:?}: {}\nlast events{}:\n{}",
            setup.seed,
            setup.env(),
            self.at_ms,
            self.check,
            self.why,
            self.client()
                .map(|m| format!(" of {m}"))
                .unwrap_or_default(),
            self.events()
        )
    }

    /// The client the broken rule names (its MAC, the first in the text), if one.
    fn client(&self) -> Option<&str> {
        let b = self.why.as_bytes();
        (0..b.len().saturating_sub(16)).find_map(|i| {
            let m = &self.why[i..i + 17];
            let mac = m.char_indices().all(|(j, c)| {
                if j % 3 == 2 {
                    c == ':'
                } else {
                    c.is_ascii_hexdigit()
                }
            });
            mac.then_some(m)
        })
    }

    /// The trace's events of the failing client and of the world (the other clients' sends
    /// left out), or all of it when the rule names no client.
    fn events(&self) -> String {
        let Some(mac) = self.client() else {
            return self.trace.clone();
        };
        if std::env::var_os("RLBD_SIM_WATCH").is_some() {
            return self.trace.clone();
        }
        let lines: Vec<&str> = self
            .trace
            .lines()
            .filter(|l| l.contains(mac) || !l.contains("02:aa:"))
            .collect();
        lines.join("\n")
    }
}

/// Runs `setup`: `Ok` with a summary, or the failure.
pub fn run(setup: &Setup) -> Result<String, Failure> {
    let population = setup.clients;
    let mut d = Driver::new(setup.seed, PORTS, population, setup.mutate);
    let faults = setup.faults;
    for sec in 1..=setup.seconds {
        let t = sec * 1000;
        d.links_due(t);
        d.run_deadlines(t);
        d.veto = false;
        d.now = t;
        d.come_up_if_due();
        if faults.has(Fault::Calm) {
            calm(&mut d);
        }
        if !d.world.calm {
            chaos(&mut d, faults);
        }
        d.world.tick_clients(t);
        probes(&mut d);
        server_arp(&mut d, faults);
        d.flush_world();
        d.second();
        if let Some((check, why)) = d.failure.take() {
            return Err(Failure {
                at_ms: t,
                check,
                why,
                trace: d.trace.dump(),
            });
        }
    }
    let r = &d.rules;
    Ok(format!(
        "{} clients on {}, {:?}, frames checked {} (NA {}, tagged {}), moves checked against the \
         hold-down {} (corrections {}), undone moves told again {}; engine \
         allocations per second {:.0}, per ARP/ND frame seen {:.1} (none for {:.0}% of them); \
         {}trace hash {:016x}",
        population,
        if d.world.rlb.is_some() {
            "a bond (balance-alb, VLAN 100)"
        } else {
            "plain ports"
        },
        d.stats,
        r.frames_checked,
        r.advertisements_checked,
        r.tagged_checked,
        r.moves.moves_checked,
        r.moves.corrections,
        r.moves.undone_checked,
        d.stats.allocs_second as f64 / d.stats.seconds.max(1) as f64,
        d.stats.allocs_frame as f64 / d.stats.frames.max(1) as f64,
        100.0 * d.stats.frames_alloc_free as f64 / d.stats.frames.max(1) as f64,
        d.guest_summary(),
        d.trace.hash()
    ))
}

/// About once an hour, a calm of `CALM_MS`: no client arrives, leaves or changes its demand,
/// and no chaos, so that the balance rule can ask whether rlbd has settled the LAN.
fn calm(d: &mut Driver) {
    let now = d.now;
    match d.rules.balance.calm_since {
        Some(t) if now >= t + CALM_MS => {
            d.world.calm = false;
            d.rules.balance.calm(None);
            d.trace.note(now, || "the calm ends".into());
        }
        None if d.refuse_p == 0.0
            && d.drops_left == 0
            && d.down.is_none()
            && d.world.rng.chance(1.0 / HOUR) =>
        {
            d.world.calm = true;
            d.rules.balance.calm(Some(now));
            d.stats.calms += 1;
            d.trace.note(now, || "a calm begins".into());
        }
        _ => {}
    }
}

/// The server kernel probes the clients it has not confirmed lately (about once a minute each).
fn probes(d: &mut Driver) {
    for c in 0..d.world.clients.len() {
        if d.world.rng.chance(1.0 / 60.0) {
            d.world.server_probe(d.now, c);
        }
    }
}

/// Failures and operations, each at its own rate.
fn chaos(d: &mut Driver, faults: Faults) {
    let now = d.now;
    let rng = &mut d.world.rng;
    let (fail, ret) = (rng.chance(1.0 / (2.0 * HOUR)), rng.chance(1.0 / 600.0));
    let restart = rng.chance(1.0 / HOUR);
    let with_state = rng.chance(0.7);
    let down_ms = 1000 * (1 + rng.below(10));
    let reload = rng.chance(1.0 / (6.0 * HOUR));
    // Overruns come with bursts of changes: a port's failure is lost with one in three.
    let overrun = rng.chance(1.0 / (HOUR / 2.0)) || (fail && rng.chance(1.0 / 3.0));
    let foreign = rng.chance(1.0 / (12.0 * HOUR));
    let refuse = rng.chance(1.0 / HOUR);
    let drops = rng.chance(1.0 / HOUR);
    let drop_secs = 10 + rng.below(50) as u32;
    let pick = rng.below(d.world.ports.len() as u64) as usize;
    let flap = rng.chance(1.0 / (2.0 * HOUR));
    let relink = rng.chance(1.0 / (8.0 * HOUR));
    // A bond's active slave fails too: the driver then swaps its MAC (the bond's) with the
    // slave that becomes active.
    let live = d.world.ports.iter().filter(|p| p.live()).count();
    let flapping = !d.due_links.is_empty();
    // First: the port changes that follow are lost with the rest of the second's messages.
    if overrun && faults.has(Fault::Overrun) {
        d.stats.overruns += 1;
        d.overrun();
    }
    if fail && faults.has(Fault::PortFailure) && live > 1 && d.world.ports[pick].live() {
        port_set(d, pick, false);
    }
    if ret {
        if let Some(p) = d.world.ports.iter().position(|p| !p.up && p.enslaved) {
            port_set(d, p, true);
        }
    }
    if flap && faults.has(Fault::Flap) && live > 1 && !flapping && d.world.ports[pick].live() {
        d.flap(pick);
    }
    if relink && faults.has(Fault::Relink) && d.world.rlb.is_some() && !flapping {
        d.relink(pick);
    }
    if restart && faults.has(Fault::Restart) {
        d.restart(with_state, down_ms);
    }
    if reload && faults.has(Fault::Reload) {
        reload_new_settings(d);
    }
    if drops && faults.has(Fault::RingDrops) {
        d.drops_left = drop_secs;
        d.trace.note(now, || {
            format!("capture rings drop frames for {drop_secs} s")
        });
    }
    // Nobody is there to warn of a foreign claim while the daemon is down.
    if foreign && faults.has(Fault::ForeignClaim) && d.down.is_none() {
        d.stats.foreign += 1;
        let other = Mac(2, 0x66, 0, 0, 0, 1);
        let garp = arp_frame(BROADCAST, 2, other, SERVER, other, SERVER);
        d.trace
            .note(now, || "a foreign host claims the server's address".into());
        d.world.foreign_claim(now, other);
        foreign_claim(d, &garp);
    }
    if refuse && faults.has(Fault::Refusal) {
        d.refuse_p = 0.3;
        d.trace
            .note(now, || "the kernel starts refusing 30% of frames".into());
    } else if d.refuse_p > 0.0 && d.world.rng.chance(1.0 / 30.0) {
        d.refuse_p = 0.0;
        d.trace
            .note(now, || "the kernel stops refusing frames".into());
    }
}

/// A reload with settings an operator might change: the threshold, the hold-down and the
/// update rate limits; the rules follow them.
fn reload_new_settings(d: &mut Driver) {
    d.stats.reloads += 1;
    let rng = &mut d.world.rng;
    let threshold = [0.7, 0.8, 0.9][rng.below(3) as usize];
    let hold_down = [20, 30, 45][rng.below(3) as usize];
    let total = [10, 20, 40][rng.below(3) as usize];
    let s = &mut d.settings;
    s.policy.threshold = threshold;
    s.policy.hold_down = hold_down;
    s.steering.total_per_sec = total;
    let per_client = s.steering.per_client_per_sec;
    d.trace.note(d.now, || {
        format!("reload: threshold {threshold}, hold_down {hold_down} s, total_per_sec {total}")
    });
    d.rules
        .reconfigure(d.now, per_client, total, hold_down, threshold);
    d.input(Input::Reload {
        settings: Box::new(d.settings.clone()),
        why: "SIGHUP",
    });
}

/// rlbd does not answer a foreign claim on the wire (docs/operations.md), and warns of it once
/// an episode (60 s of quiet end one).
fn foreign_claim(d: &mut Driver, garp: &[u8]) {
    let Some(frame) = rlbd::capture::parse(garp) else {
        return d.fail(Check::World, "the foreign claim does not parse".into());
    };
    let (sends, warned) = (d.stats.sends, d.foreign_warnings);
    d.input(Input::Frame {
        frame: &frame,
        outgoing: false,
        vlan: 0,
    });
    if d.stats.sends != sends {
        let why = "rlbd answered a foreign claim of the server's address on the wire";
        d.fail(Check::ForeignClaim, why.into());
    }
    let new_episode = d.last_foreign.is_none_or(|t| d.now >= t + 60_000);
    if new_episode && d.foreign_warnings == warned {
        let why = "a foreign claim of the server's address, first in 60 s, was not warned of";
        d.fail(Check::ForeignClaim, why.into());
    }
    d.last_foreign = Some(d.now);
}

pub fn port_set(d: &mut Driver, p: usize, up: bool) {
    if !up {
        d.stats.port_failures += 1;
    }
    let name = d.world.ports[p].name.clone();
    d.trace.note(d.now, || {
        format!("port {name} {}", if up { "up" } else { "down" })
    });
    let holder = |d: &Driver| d.world.ports.iter().position(|q| q.mac == d.world.bond_mac);
    let before = holder(d);
    d.world.set_carrier(d.now, p, up);
    d.flush_world();
    d.ports_agree();
    // The driver's round follows, with the MACs of a swap the change brought.
    if d.world.reselect_active(d.now) {
        d.stats.mac_swaps += 1;
        let names = |x: Option<usize>| x.map_or("none".into(), |i| d.world.ports[i].name.clone());
        let (from, to) = (names(before), names(holder(d)));
        d.trace.note(d.now, || {
            format!("the bond's MAC moves from {from} to {to} (MACs swapped)")
        });
    }
    d.world.rlb_round(d.now);
    d.flush_world();
    d.ports_agree();
}
