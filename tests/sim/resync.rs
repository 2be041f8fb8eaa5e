//! The shell's netlink reader, simulated as `src/netlink/socket` is: every event handed to the
//! engine goes through the real resync mirror (`rlbd::netlink::Mirror`); an overrun loses what
//! the kernel said from its moment to the end of the second (link, address and neighbour changes
//! the world made never reach the engine) and is then reported as `NlEvent::Overrun`, or sooner
//! when the reader reads an answer from that socket (the kernel reports the loss first); the
//! engine's `Output::Redump` is answered, once the outputs of the moment are routed, by the four
//! dumps the daemon's reader asks for (links, addresses, neighbours, the FDB), each followed by
//! the removals its sweep finds and `DumpDone`, as `RouteSocket::dump_done` ends them. After the
//! last one the `Resync` check: the engine's neighbours and addresses are the kernel's, and so
//! are its ports (`PortView`, suspended while messages are being lost).

use std::net::IpAddr;

use rlbd::client::ClientKey;
use rlbd::engine::Input;
use rlbd::netlink::{DumpKind, Mirror, NlEvent};

use super::checks::Check;
use super::driver::Driver;
use rlbd::simulate::lan::bond::{VLAN_ID, VLAN_IF};

/// The reader's state: its mirror, and an overrun in progress.
#[derive(Default)]
pub struct NlShell {
    pub mirror: Mirror,
    /// The kernel is dropping our notifications (an overrun) since this time.
    pub losing: Option<u64>,
    /// The engine asked for a re-dump: answered once the outputs of the moment are routed.
    pub redump: bool,
    /// Ports whose counters the engine asked for: answered together, one batch, once the
    /// outputs of the moment are routed (as the reader reads the answers).
    pub counters: Vec<u32>,
}

/// The dumps a re-dump asks for, in the order `NetlinkReader::redump` requests them.
const DUMPS: [DumpKind; 4] = [
    DumpKind::Links,
    DumpKind::Addresses,
    DumpKind::Neighbours,
    DumpKind::Fdb,
];

fn of_kind(ev: &NlEvent, kind: DumpKind) -> bool {
    match kind {
        DumpKind::Links => matches!(ev, NlEvent::Link(_)),
        DumpKind::Addresses => matches!(ev, NlEvent::Addr(_)),
        DumpKind::Neighbours => matches!(ev, NlEvent::Neigh(_)),
        DumpKind::Fdb => matches!(ev, NlEvent::Fdb(_)),
    }
}

impl NlShell {
    /// A new daemon's socket, and the start-up snapshot it reported.
    pub fn fresh(snapshot: &[NlEvent]) -> NlShell {
        let mut nl = NlShell::default();
        for ev in snapshot {
            nl.mirror.observe(ev);
        }
        nl
    }
}

impl Driver {
    /// A batch of netlink messages from the world: lost in an overrun, else seen by the reader's
    /// mirror and handed in.
    pub fn netlink(&mut self, events: Vec<NlEvent>) {
        if self.nl.losing.is_some() {
            self.stats.netlink_lost += events.len() as u64;
            return;
        }
        for ev in &events {
            self.nl.mirror.observe(ev);
        }
        self.input(Input::Netlink(&events));
    }

    /// The kernel starts dropping our notifications now, until the end of the second.
    pub fn overrun(&mut self) {
        if self.down.is_none() && self.nl.losing.is_none() {
            self.nl.losing = Some(self.now);
            self.trace
                .note(self.now, || "netlink overrun: messages lost".into());
        }
    }

    /// The end of the second's overrun: the reader reports it (the engine asks for a re-dump).
    pub fn overrun_reported(&mut self) {
        if self.nl.losing.take().is_none() || self.down.is_some() {
            return;
        }
        let lost = self.stats.netlink_lost;
        self.trace.note(self.now, || {
            format!("netlink overrun reported ({lost} lost so far)")
        });
        self.input(Input::Netlink(&[NlEvent::Overrun]));
    }

    /// The counters the engine asked for, in one batch of link messages. They come on the
    /// socket that is losing notifications: the kernel reports the loss (ENOBUFS) before
    /// anything queued after it, so an overrun under way is reported first.
    pub fn answer_counters(&mut self) {
        while !self.nl.counters.is_empty() {
            let asked = std::mem::take(&mut self.nl.counters);
            if self.down.is_some() {
                return;
            }
            self.overrun_reported();
            let ev: Vec<NlEvent> = asked
                .iter()
                .filter_map(|i| self.world.ports.iter().position(|p| p.ifindex == *i))
                .map(|p| self.world.port_link(p))
                .collect();
            for e in &ev {
                self.nl.mirror.observe(e);
            }
            let before = super::alloc::count();
            self.engine.handle(self.now, Input::Netlink(&ev));
            self.stats.allocs_quiet += super::alloc::count() - before;
            while let Some(out) = self.engine.poll_output() {
                self.carry_out(out);
            }
        }
    }

    /// The re-dump the engine asked for, answered as the reader answers it.
    pub fn answer_redump(&mut self) {
        if !std::mem::take(&mut self.nl.redump) || self.down.is_some() {
            return;
        }
        self.stats.redumps += 1;
        let dump = self.world.dump();
        for kind in DUMPS {
            self.nl.mirror.begin(kind);
            let mut batch: Vec<NlEvent> =
                dump.iter().filter(|e| of_kind(e, kind)).cloned().collect();
            for ev in &batch {
                self.nl.mirror.observe(ev);
            }
            batch.extend(self.nl.mirror.finish(kind));
            batch.push(NlEvent::DumpDone);
            self.input(Input::Netlink(&batch));
        }
        let ours: Vec<IpAddr> = dump
            .iter()
            .filter_map(|e| match e {
                NlEvent::Addr(a) => Some(a.network.ip()),
                _ => None,
            })
            .collect();
        self.resynced(&ours);
    }

    /// After a re-dump, the engine's view is the kernel's: every neighbour of the server's at its
    /// MAC and no other, every address of the server's, and its ports.
    fn resynced(&mut self, ours: &[IpAddr]) {
        let host = self.engine.host();
        let vlan = |ifindex: u32| if ifindex == VLAN_IF { VLAN_ID } else { 0 };
        let missing = self
            .world
            .neigh
            .iter()
            .find(|(ip, n)| !host.confirms(ClientKey::new(n.mac, vlan(n.ifindex)), **ip));
        let why = if let Some((ip, n)) = missing {
            Some(format!(
                "the kernel has neighbour {ip} at {}, the engine not after a re-dump",
                n.mac
            ))
        } else if host.confirmed_neighbours() != self.world.neigh.len() {
            Some(format!(
                "the engine has {} neighbours after a re-dump, the kernel {}",
                host.confirmed_neighbours(),
                self.world.neigh.len()
            ))
        } else {
            ours.iter()
                .find(|ip| !host.is_ours(**ip))
                .map(|ip| format!("the server's address {ip} is not the engine's after a re-dump"))
        };
        if let Some(why) = why {
            return self.fail(Check::Resync, why);
        }
        self.ports_agree();
    }
}
