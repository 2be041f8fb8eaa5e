//! One run: the simulated seconds, the chaos between them, and the report of a failure.

use rlbd::engine::Input;
use rlbd::netlink::NlEvent;
use rlbd::steer::Rule;
use rlbd::Mac;

use super::clients::{arp_frame, BROADCAST, SERVER};
use super::driver::Driver;
use super::world::ToEngine;

const PORTS: usize = 4;
const HOUR: f64 = 3600.0;

/// Runs `days` simulated days with `seed`: `Ok` with a summary, or the failure with the seed and
/// the trace.
pub fn run(seed: u64, days: f64, mutate: Option<Rule>) -> Result<String, String> {
    let population = 30 + (seed % 4) as usize * 15;
    let mut d = Driver::new(seed, PORTS, population, mutate);
    let secs = (days * 86_400.0) as u64;
    for sec in 1..=secs {
        let t = sec * 1000;
        d.run_deadlines(t);
        d.now = t;
        chaos(&mut d);
        d.world.tick_clients(t);
        probes(&mut d);
        d.flush_world();
        d.second();
        if let Some(why) = d.failure.take() {
            return Err(format!(
                "simulation failed: seed {seed} (RLBD_SIM_SEED={seed}), at {t} ms: {why}\nlast events:\n{}",
                d.trace.dump()
            ));
        }
    }
    let r = &d.rules;
    Ok(format!(
        "{} clients, {:?}, frames checked {}, chosen moves {}",
        population, d.stats, r.frames_checked, r.chosen_moves
    ))
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
fn chaos(d: &mut Driver) {
    let now = d.now;
    let rng = &mut d.world.rng;
    let (fail, ret) = (rng.chance(1.0 / (2.0 * HOUR)), rng.chance(1.0 / 600.0));
    let restart = rng.chance(1.0 / HOUR);
    let with_state = rng.chance(0.7);
    let reload = rng.chance(1.0 / (6.0 * HOUR));
    let overrun = rng.chance(1.0 / (2.0 * HOUR));
    let foreign = rng.chance(1.0 / (12.0 * HOUR));
    let refuse = rng.chance(1.0 / HOUR);
    let pick = rng.below(PORTS as u64) as usize;
    if fail && d.world.ports.iter().filter(|p| p.up).count() > 1 && d.world.ports[pick].up {
        port_set(d, pick, false);
    }
    if ret {
        if let Some(p) = d.world.ports.iter().position(|p| !p.up) {
            port_set(d, p, true);
        }
    }
    if restart {
        d.restart(with_state);
    }
    if reload {
        d.stats.reloads += 1;
        d.trace.note(now, || "reload".into());
        d.input(Input::Reload {
            settings: Box::new(d.settings.clone()),
            why: "SIGHUP",
        });
    }
    if overrun {
        d.stats.overruns += 1;
        d.trace.note(now, || "netlink overrun".into());
        d.input(Input::Netlink(&[NlEvent::Overrun]));
    }
    if foreign {
        d.stats.foreign += 1;
        let other = Mac(2, 0x66, 0, 0, 0, 1);
        let garp = arp_frame(BROADCAST, 2, other, SERVER, other, SERVER);
        d.trace
            .note(now, || "a foreign host claims the server's address".into());
        d.world.to_engine.push(ToEngine::Frame(garp, false));
    }
    if refuse {
        d.refuse_p = 0.3;
        d.trace
            .note(now, || "the kernel starts refusing 30% of frames".into());
    } else if d.refuse_p > 0.0 && d.world.rng.chance(1.0 / 30.0) {
        d.refuse_p = 0.0;
        d.trace
            .note(now, || "the kernel stops refusing frames".into());
    }
}

fn port_set(d: &mut Driver, p: usize, up: bool) {
    let port = &mut d.world.ports[p];
    port.up = up;
    if !up {
        port.down_since = d.now;
        d.stats.port_failures += 1;
    }
    let name = port.name.clone();
    d.trace.note(d.now, || {
        format!("port {name} {}", if up { "up" } else { "down" })
    });
    let ev = [d.world.ports[p].link()];
    d.input(Input::Netlink(&ev));
}
