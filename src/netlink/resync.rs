//! Resynchronisation after lost notifications: a dump reports what exists, never what stopped
//! existing while the kernel was dropping our notifications (ENOBUFS). So the socket keeps the
//! keys of every link, address, neighbour and FDB entry it has reported, and when a dump of one
//! kind completes it reports as removed each key of that kind that neither the dump nor a
//! notification received since the dump was sent has mentioned. The consumer's view then equals
//! the kernel's, without having to know which events came from which dump.
//!
//! Pure: fed with the events the socket decodes and told when dumps start and end (public so
//! that the simulation's shell runs the same sweep: `tests/sim/resync.rs`).

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use super::addr::AddrEntry;
use super::event::NlEvent;
use super::fdb::{FdbEntry, FdbKey};
use super::neigh::NeighEntry;
use super::request::DumpKind;

type NeighKey = (u32, IpAddr);

/// What was mentioned since a dump of one kind was sent.
#[derive(Debug, Default)]
struct Seen {
    links: HashSet<u32>,
    addrs: HashSet<AddrEntry>,
    neigh: HashSet<NeighKey>,
    fdb: HashSet<FdbKey>,
}

/// The keys reported so far, and the sweeps in progress (at most one per kind).
#[derive(Debug, Default)]
pub struct Mirror {
    links: HashMap<u32, String>,
    addrs: HashSet<AddrEntry>,
    neigh: HashMap<NeighKey, NeighEntry>,
    fdb: HashMap<FdbKey, FdbEntry>,
    sweeps: Vec<(DumpKind, Seen)>,
}

impl Mirror {
    /// Records one event that is about to be handed to the consumer.
    pub fn observe(&mut self, ev: &NlEvent) {
        match ev {
            NlEvent::Link(l) => {
                self.links.insert(l.index, l.name.clone());
                self.mark(DumpKind::Links, |s| {
                    s.links.insert(l.index);
                });
            }
            NlEvent::LinkRemoved { index, .. } => {
                self.links.remove(index);
                // The kernel does not always announce the removal of a gone link's addresses
                // and neighbours; the consumer forgets them with the link, and so do we.
                self.addrs.retain(|a| a.ifindex != *index);
                self.neigh.retain(|(i, _), _| i != index);
                // A device's own entries go with it unannounced; a bridge's with the bridge.
                self.fdb
                    .retain(|k, e| e.ifindex != *index && k.table != *index);
            }
            NlEvent::Addr(a) => {
                self.addrs.insert(*a);
                self.mark(DumpKind::Addresses, |s| {
                    s.addrs.insert(*a);
                });
            }
            NlEvent::AddrRemoved(a) => {
                self.addrs.remove(a);
            }
            NlEvent::Neigh(n) => {
                let key = (n.ifindex, n.ip);
                self.neigh.insert(key, n.clone());
                self.mark(DumpKind::Neighbours, |s| {
                    s.neigh.insert(key);
                });
            }
            NlEvent::NeighRemoved(n) => {
                self.neigh.remove(&(n.ifindex, n.ip));
            }
            NlEvent::Fdb(e) => {
                let key = e.key();
                self.fdb.insert(key, *e);
                self.mark(DumpKind::Fdb, |s| {
                    s.fdb.insert(key);
                });
            }
            NlEvent::FdbRemoved(e) => {
                self.fdb.remove(&e.key());
            }
            NlEvent::DumpDone | NlEvent::Overrun => {}
        }
    }

    fn mark(&mut self, kind: DumpKind, f: impl FnOnce(&mut Seen)) {
        if let Some((_, seen)) = self.sweeps.iter_mut().find(|(k, _)| *k == kind) {
            f(seen);
        }
    }

    /// A dump of `kind` was just sent: from now on, what it and the notifications mention is
    /// what exists. A sweep of the same kind already running starts over.
    pub fn begin(&mut self, kind: DumpKind) {
        self.abort(kind);
        self.sweeps.push((kind, Seen::default()));
    }

    /// The dump of `kind` failed, was abandoned or came back inconsistent: nothing is removed.
    pub fn abort(&mut self, kind: DumpKind) {
        self.sweeps.retain(|(k, _)| *k != kind);
    }

    /// The dump of `kind` completed: the removals of everything of that kind it did not mention
    /// (applied to the mirror already), for the consumer.
    pub fn finish(&mut self, kind: DumpKind) -> Vec<NlEvent> {
        let Some(i) = self.sweeps.iter().position(|(k, _)| *k == kind) else {
            return Vec::new();
        };
        let (_, seen) = self.sweeps.swap_remove(i);
        let mut gone = Vec::new();
        match kind {
            DumpKind::Links => {
                let stale: Vec<u32> = self
                    .links
                    .keys()
                    .filter(|i| !seen.links.contains(i))
                    .copied()
                    .collect();
                for index in stale {
                    if let Some(name) = self.links.get(&index).cloned() {
                        gone.push(NlEvent::LinkRemoved { index, name });
                    }
                }
            }
            DumpKind::Addresses => {
                gone.extend(
                    self.addrs
                        .iter()
                        .filter(|a| !seen.addrs.contains(a))
                        .map(|a| NlEvent::AddrRemoved(*a)),
                );
            }
            DumpKind::Neighbours => {
                gone.extend(
                    self.neigh
                        .iter()
                        .filter(|(k, _)| !seen.neigh.contains(k))
                        .map(|(_, n)| NlEvent::NeighRemoved(n.clone())),
                );
            }
            DumpKind::Fdb => {
                gone.extend(
                    self.fdb
                        .iter()
                        .filter(|(k, _)| !seen.fdb.contains(k))
                        .map(|(_, e)| NlEvent::FdbRemoved(*e)),
                );
            }
        }
        for ev in &gone {
            self.observe(ev);
        }
        gone
    }

    /// Neighbours reported and not removed (for tests and the log).
    #[cfg(test)]
    pub fn neighbours(&self) -> usize {
        self.neigh.len()
    }

    /// FDB entries reported and not removed (for tests).
    #[cfg(test)]
    pub fn fdb_entries(&self) -> usize {
        self.fdb.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::LinkInfo;
    use std::net::Ipv4Addr;

    fn neigh(last: u8) -> NeighEntry {
        NeighEntry {
            ifindex: 2,
            ip: Ipv4Addr::new(198, 18, 0, last).into(),
            mac: Some(crate::Mac(2, 0, 0, 0, 0, last)),
            state: libc::NUD_REACHABLE,
        }
    }

    fn link(index: u32) -> LinkInfo {
        LinkInfo {
            index,
            name: format!("p{index}"),
            ..LinkInfo::default()
        }
    }

    #[test]
    fn a_neighbour_missed_while_overrun_is_removed_by_the_next_dump() {
        let mut m = Mirror::default();
        for i in 1..=3 {
            m.observe(&NlEvent::Neigh(neigh(i)));
        }
        // .2 was deleted while the kernel dropped our notifications.
        m.begin(DumpKind::Neighbours);
        m.observe(&NlEvent::Neigh(neigh(1)));
        // A notification during the dump counts as much as the dump itself.
        m.observe(&NlEvent::Neigh(neigh(4)));
        m.observe(&NlEvent::Neigh(neigh(3)));
        let gone = m.finish(DumpKind::Neighbours);
        assert_eq!(gone, vec![NlEvent::NeighRemoved(neigh(2))]);
        assert_eq!(m.neighbours(), 3);
        // Nothing more to sweep without a new dump.
        assert!(m.finish(DumpKind::Neighbours).is_empty());
    }

    #[test]
    fn other_kinds_and_aborted_dumps_remove_nothing() {
        let mut m = Mirror::default();
        m.observe(&NlEvent::Neigh(neigh(1)));
        m.observe(&NlEvent::Link(link(2)));
        m.begin(DumpKind::Links);
        m.begin(DumpKind::Neighbours);
        m.observe(&NlEvent::Link(link(2)));
        assert!(m.finish(DumpKind::Links).is_empty(), "the link was dumped");
        m.abort(DumpKind::Neighbours);
        assert!(m.finish(DumpKind::Neighbours).is_empty());
        assert_eq!(m.neighbours(), 1);
    }

    #[test]
    fn stale_links_and_addresses_are_removed() {
        let mut m = Mirror::default();
        m.observe(&NlEvent::Link(link(2)));
        m.observe(&NlEvent::Link(link(3)));
        let a = AddrEntry {
            ifindex: 2,
            network: "198.18.0.1/24".parse().unwrap(),
        };
        m.observe(&NlEvent::Addr(a));
        m.begin(DumpKind::Links);
        m.observe(&NlEvent::Link(link(2)));
        assert_eq!(
            m.finish(DumpKind::Links),
            vec![NlEvent::LinkRemoved {
                index: 3,
                name: "p3".into()
            }]
        );
        m.begin(DumpKind::Addresses);
        assert_eq!(m.finish(DumpKind::Addresses), vec![NlEvent::AddrRemoved(a)]);
    }

    fn fdb(port: u32, last: u8) -> FdbEntry {
        FdbEntry {
            ifindex: port,
            master: Some(9),
            mac: crate::Mac(0x52, 0x54, 0, 0, 0, last),
            vlan: 0,
            kind: crate::netlink::FdbKind::Learned,
            ext_learned: false,
            own: false,
            state: libc::NUD_REACHABLE,
            flags: 0,
        }
    }

    #[test]
    fn fdb_entries_missed_while_overrun_are_removed_and_moves_are_not() {
        let mut m = Mirror::default();
        for i in 1..=3 {
            m.observe(&NlEvent::Fdb(fdb(2, i)));
        }
        m.begin(DumpKind::Fdb);
        // :01 moved to port 3 (same key), :02 aged out unheard, :03 is still there.
        m.observe(&NlEvent::Fdb(fdb(3, 1)));
        m.observe(&NlEvent::Fdb(fdb(2, 3)));
        assert!(m.finish(DumpKind::Neighbours).is_empty(), "another kind");
        assert_eq!(
            m.finish(DumpKind::Fdb),
            vec![NlEvent::FdbRemoved(fdb(2, 2))]
        );
        assert_eq!(m.fdb_entries(), 2);
        // A removal names the entry's last port; the key finds it wherever it was learned.
        m.observe(&NlEvent::FdbRemoved(fdb(3, 1)));
        assert_eq!(m.fdb_entries(), 1);
    }

    #[test]
    fn a_removed_bridge_or_port_takes_its_fdb_entries_along() {
        let mut m = Mirror::default();
        m.observe(&NlEvent::Fdb(fdb(2, 1)));
        m.observe(&NlEvent::Fdb(fdb(3, 2)));
        m.observe(&NlEvent::LinkRemoved {
            index: 2,
            name: "p2".into(),
        });
        assert_eq!(m.fdb_entries(), 1);
        m.observe(&NlEvent::LinkRemoved {
            index: 9,
            name: "br".into(),
        });
        assert_eq!(m.fdb_entries(), 0);
        m.begin(DumpKind::Fdb);
        assert!(m.finish(DumpKind::Fdb).is_empty());
    }

    #[test]
    fn a_removed_link_takes_its_neighbours_along() {
        let mut m = Mirror::default();
        m.observe(&NlEvent::Link(link(2)));
        m.observe(&NlEvent::Neigh(neigh(1)));
        m.observe(&NlEvent::LinkRemoved {
            index: 2,
            name: "p2".into(),
        });
        m.begin(DumpKind::Neighbours);
        assert!(m.finish(DumpKind::Neighbours).is_empty());
    }
}
