//! The guests' edge: the pins and counters maps, the bond's egress program, each port's ingress
//! program and promiscuous hold, and once a second the guests' counts for the engine. It carries
//! out the engine's `GuestPath`, `PinGuest` and `UnpinGuest`; it decides nothing. Its own I/O
//! errors are logged here (a program that will not attach, a map that will not take a pin).

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};

use log::{info, warn};

use crate::capture::ebpf::guest::{GuestCounters, GuestKey, GuestMaps, MAX_PORTS};
use crate::capture::ebpf::tc::hook::{Direction, HookAttached};
use crate::capture::promisc::Promiscuous;
use crate::client::ClientKey;
use crate::engine::{Engine, Input, PortRef};
use crate::guests::GuestCount;

use super::captures::Captures;

/// Guests the maps hold at most.
const MAX_GUESTS: u32 = 4096;

/// A program and where it is attached (detached on drop, the attachment first).
struct Attached {
    _hook: HookAttached,
    _prog: OwnedFd,
}

/// One port's part of the guest path.
struct PortPath {
    _ingress: Attached,
    _promisc: Promiscuous,
}

#[derive(Default)]
pub struct GuestIo {
    maps: Option<GuestMaps>,
    egress: Option<Attached>,
    ports: Vec<Option<PortPath>>,
    /// Each pinned guest's port (its transmit and "seen" counts go there).
    pinned: HashMap<GuestKey, usize>,
    /// The last second's totals, to diff.
    last: HashMap<GuestKey, GuestCounters>,
    counts: Vec<GuestCount>,
}

impl GuestIo {
    /// The guest path on (maps, the bond's egress program; each port's part follows,
    /// [`Self::port_opened`]) or off (everything dropped: the programs detach, the ports'
    /// promiscuity is given back). `bond`: its ifindex and name. `Err`: why the path cannot be
    /// had (the engine then gives guests up: without the programs a pinned guest's
    /// announcement would only teach the host's bridge its MAC on the bond).
    pub fn set(&mut self, on: bool, bond: Option<&(u32, String)>) -> Result<(), String> {
        if !on {
            if self.maps.is_some() {
                info!("guests: the guest path is off (programs detached, ports given back)");
            }
            *self = GuestIo::default();
            return Ok(());
        }
        if self.maps.is_some() {
            return Ok(());
        }
        let maps =
            GuestMaps::new(MAX_GUESTS).map_err(|e| format!("cannot create the maps: {e}"))?;
        let Some((bond, name)) = bond else {
            return Err("no bond".into());
        };
        let egress =
            attach(&maps, name, *bond, None, true).map_err(|e| format!("bond {name}: {e}"))?;
        self.egress = Some(egress);
        self.maps = Some(maps);
        Ok(())
    }

    /// Port `p`'s part (its capture open, its counting settled): its ingress program after the
    /// counting one, and promiscuous.
    pub fn port_opened(&mut self, p: &PortRef, captures: &Captures) -> Result<(), String> {
        let Some(maps) = &self.maps else {
            return Ok(());
        };
        let i = p.id.index();
        if self.ports.len() <= i {
            self.ports.resize_with(i + 1, || None);
        }
        // The guest program follows the counting one: as a tcx link only where that is one.
        let links = captures.get(i).and_then(|c| c.kernel_tc_attach()) != Some("cls_bpf");
        if i >= MAX_PORTS {
            return Err(format!("port {}: more than {MAX_PORTS} ports", p.name));
        }
        let ingress =
            attach(maps, &p.name, p.ifindex, Some(i), links).map_err(|e| e.to_string())?;
        let promisc = Promiscuous::hold(p.ifindex)
            .map_err(|e| format!("port {}: cannot make it promiscuous: {e}", p.name))?;
        self.ports[i] = Some(PortPath {
            _ingress: ingress,
            _promisc: promisc,
        });
        Ok(())
    }

    /// Port `i` went away: its part dropped.
    pub fn port_closed(&mut self, i: usize) {
        if let Some(p) = self.ports.get_mut(i) {
            *p = None;
        }
    }

    pub fn pin(&mut self, key: ClientKey, port: usize, ifindex: u32) {
        let Some(maps) = &self.maps else {
            return;
        };
        match maps.pin(key.mac, key.vlan, ifindex) {
            Ok(()) => {
                self.pinned.insert(GuestKey::new(key.mac, key.vlan), port);
            }
            Err(e) => warn!("guests: {e}"),
        }
    }

    pub fn unpin(&mut self, key: ClientKey) {
        let g = GuestKey::new(key.mac, key.vlan);
        self.pinned.remove(&g);
        self.last.remove(&g);
        if let Some(maps) = &self.maps {
            if let Err(e) = maps.unpin(key.mac, key.vlan) {
                warn!("guests: {e}");
            }
        }
    }

    /// The second's counts for the engine: received per port, transmitted and seen from the
    /// switch on the guest's own port.
    pub fn second(&mut self, now: u64, engine: &mut Engine) {
        let Some(maps) = &self.maps else {
            return;
        };
        let readings = match maps.read() {
            Ok(r) => r,
            Err(e) => return warn!("guests: cannot read the counters: {e}"),
        };
        self.counts.clear();
        for r in readings {
            let d = self
                .last
                .get(&r.guest)
                .map_or(r.counters, |l| r.counters.since(l));
            self.last.insert(r.guest, r.counters);
            let key = ClientKey::new(r.guest.mac, r.guest.vlan);
            let home = self.pinned.get(&r.guest).copied();
            for (port, &(_, bytes)) in d.rx.iter().enumerate() {
                if bytes > 0 && Some(port) != home {
                    self.counts.push(count(key, port, bytes, 0, 0));
                }
            }
            if let Some(port) = home {
                let rx = d.rx.get(port).map_or(0, |r| r.1);
                self.counts
                    .push(count(key, port, rx, d.tx_bytes, d.seen_from_switch));
            }
        }
        engine.handle(now, Input::GuestCounts(&self.counts));
    }
}

fn count(key: ClientKey, port: usize, rx: u64, tx: u64, seen: u64) -> GuestCount {
    GuestCount {
        key,
        port: crate::engine::PortId::new(port),
        rx_bytes: rx,
        tx_bytes: tx,
        seen_from_switch: seen,
    }
}

/// Loads and attaches a guest program: the bond's egress one (`slot` None) or port `slot`'s
/// ingress one.
fn attach(
    maps: &GuestMaps,
    dev: &str,
    ifindex: u32,
    slot: Option<usize>,
    links: bool,
) -> std::io::Result<Attached> {
    let (prog, hook) = match slot {
        None => (maps.load_egress(dev)?, Direction::Egress),
        Some(s) => (maps.load_ingress(dev, ifindex, s)?, Direction::Ingress),
    };
    let name = crate::capture::ebpf::guest::prog_name(dev);
    let hook = HookAttached::attach(dev, ifindex, hook, prog.as_fd(), &name, links)?;
    info!(
        "guests: {dev}: program at the {} hook ({})",
        if slot.is_none() { "egress" } else { "ingress" },
        hook.how()
    );
    Ok(Attached {
        _hook: hook,
        _prog: prog,
    })
}
