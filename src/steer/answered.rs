//! The clients the host itself told which port to use (its ARP replies, its unicast ARP
//! requests, its Neighbor Advertisements and Solicitations), and when. On plain ports nobody
//! but rlbd moves a client off a port that fails, and a client that has resolved the server but
//! not yet sent is in no client table: this is the only record of where it will send. A bond's
//! driver keeps its own (balance-alb re-steers the clients it answered; balance-tlb's answers
//! carry a MAC that follows the active slave), so the daemon keeps this one on plain ports only.
//!
//! Pure and bounded: at most `bound` clients, the one the host told longest ago forgotten first.

use std::collections::HashMap;

use super::core::forget_oldest;
use super::core::PortIndex;
use crate::client::ClientKey;
use crate::host::Claim;

/// Answers this close together are one round: a request broadcast to several ports is answered
/// on each, and the client keeps whichever it took (Linux's `locktime`, 1 s by default, keeps
/// the first; others the last). Past it, a new answer replaces what the client was told.
pub const ROUND_MS: u64 = 1000;

/// Ports tracked per client: a bitmask. Ports past the 64th are not tracked (plain-port setups
/// name a handful).
const MAX_PORT: PortIndex = 64;

/// Claims kept per client: one per server address it asked for, as a move claims
/// (`ServerSet::MAX`).
const MAX_CLAIMS: usize = 4;

#[derive(Debug, Clone, PartialEq)]
struct Entry {
    /// Ports whose MAC the host gave it in its latest round.
    ports: u64,
    /// When that round began.
    round_ms: u64,
    /// When the host last told it: frames counted since before then may predate the answer.
    last_ms: u64,
    /// The addresses the host's frames paired: what a move of it claims.
    claims: Vec<Claim>,
    /// When it was last told, in notes: the oldest is forgotten first past the bound.
    stamp: u64,
}

/// A client to move off a failed port that only the host's answers place there.
#[derive(Debug, Clone, PartialEq)]
pub struct Stranded {
    pub key: ClientKey,
    /// The failed port it may be on.
    pub port: PortIndex,
    pub claims: Vec<Claim>,
}

#[derive(Debug, Default)]
pub struct Answered {
    map: HashMap<ClientKey, Entry>,
    stamp: u64,
    /// Per (VLAN, port), the latest frame the host sent to every neighbour on that VLAN (a
    /// broadcast ARP request, a multicast NA or NS): each hearer with an entry for the server
    /// takes that port's MAC. Kept apart and applied when asked, so a burst of broadcasts costs
    /// nothing per client.
    broadcasts: HashMap<(u16, PortIndex), u64>,
    bound: usize,
    /// What the state file holds of it changed since [`take_changed`](Self::take_changed): a
    /// host answering the same client on the same port again changes nothing durable.
    changed: bool,
}

fn bit(port: PortIndex) -> u64 {
    1u64 << port
}

impl Answered {
    pub fn new(bound: usize) -> Self {
        Answered {
            bound: bound.max(1),
            ..Answered::default()
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// A new bound (a reload); the clients told longest ago go first if it shrank.
    pub fn set_bound(&mut self, bound: usize) {
        self.bound = bound.max(1);
        self.trim();
    }

    /// The host told `key`, at `now`, to use `port` for `claim`'s server address.
    pub fn note(&mut self, now: u64, key: ClientKey, port: PortIndex, claim: Claim) {
        if port >= MAX_PORT {
            return;
        }
        self.stamp += 1;
        let stamp = self.stamp;
        let e = self.map.entry(key).or_insert_with(|| Entry {
            ports: 0,
            round_ms: now,
            last_ms: now,
            claims: Vec::new(),
            stamp,
        });
        let ports_before = e.ports;
        if now.saturating_sub(e.round_ms) > ROUND_MS || e.ports == 0 {
            e.ports = 0;
            e.round_ms = now;
        }
        e.ports |= bit(port);
        e.last_ms = now;
        e.stamp = stamp;
        let mut changed = e.ports != ports_before;
        if let Some(c) = e.claims.iter_mut().find(|c| c.server() == claim.server()) {
            changed |= *c != claim;
            *c = claim;
        } else {
            if e.claims.len() >= MAX_CLAIMS {
                e.claims.remove(0);
            }
            e.claims.push(claim);
            changed = true;
        }
        self.changed |= changed;
        self.trim();
    }

    /// The host sent a frame from `port` to every neighbour on `vlan`.
    pub fn broadcast(&mut self, now: u64, vlan: u16, port: PortIndex) {
        if port < MAX_PORT {
            self.broadcasts.insert((vlan, port), now);
            self.changed = true;
        }
    }

    /// The client's frames were counted on `port` since `since_ms`: it sends where they arrive,
    /// and an answer older than them no longer says where that is (one given since may be newer
    /// than the frames: the whole round is kept then). The record follows them: once
    /// the client idles long enough for the client table to forget it, this is all that says
    /// where its next frames go.
    pub fn counted(&mut self, key: &ClientKey, port: PortIndex, since_ms: u64) {
        if let Some(e) = self.map.get_mut(key).filter(|e| e.last_ms < since_ms) {
            if port < MAX_PORT {
                self.changed |= e.ports != bit(port);
                e.ports = bit(port);
                e.round_ms = since_ms;
                e.last_ms = since_ms;
            } else {
                self.map.remove(key);
                self.changed = true;
            }
        }
    }

    /// rlbd moved the client: where it is is the move's business now.
    pub fn forget(&mut self, key: &ClientKey) {
        self.changed |= self.map.remove(key).is_some();
    }

    /// The ports `key` may be using from what the host told it: its latest round, and every
    /// port the host broadcast from on its VLAN since that round began.
    fn ports_of(&self, key: &ClientKey, e: &Entry) -> u64 {
        self.broadcasts
            .iter()
            .filter(|((vlan, _), at)| *vlan == key.vlan && **at >= e.round_ms)
            .fold(e.ports, |m, ((_, p), _)| m | bit(*p))
    }

    /// The clients the host's answers may have left on one of the `down` ports, in key order
    /// (the planner breaks ties by index: a stable order keeps the outcome deterministic).
    pub fn on_ports(&self, down: &[PortIndex]) -> Vec<Stranded> {
        let mask = down
            .iter()
            .filter(|p| **p < MAX_PORT)
            .fold(0u64, |m, p| m | bit(*p));
        if mask == 0 {
            return Vec::new();
        }
        let mut v: Vec<Stranded> = self
            .map
            .iter()
            .filter_map(|(k, e)| {
                let hit = self.ports_of(k, e) & mask;
                (hit != 0).then(|| Stranded {
                    key: *k,
                    port: hit.trailing_zeros() as PortIndex,
                    claims: e.claims.clone(),
                })
            })
            .collect();
        v.sort_by_key(|s| s.key);
        v
    }

    /// Every client with the ports (a bitmask) the host's frames may have left it on, and its
    /// claims: what a restarted daemon needs to fail them over.
    pub fn export(&self) -> Vec<(ClientKey, u64, Vec<Claim>)> {
        let mut v: Vec<_> = self
            .map
            .iter()
            .map(|(k, e)| (*k, self.ports_of(k, e), e.claims.clone()))
            .collect();
        v.sort_by_key(|(k, _, _)| *k);
        v
    }

    /// Whether what the state file holds of it changed since the last call.
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// A client an earlier daemon's host answered on the `ports` (a bitmask), at `now`.
    pub fn restore(&mut self, now: u64, key: ClientKey, ports: u64, claims: Vec<Claim>) {
        self.stamp += 1;
        let claims = claims.into_iter().take(MAX_CLAIMS).collect();
        let e = Entry {
            ports,
            round_ms: now,
            last_ms: now,
            claims,
            stamp: self.stamp,
        };
        self.map.insert(key, e);
        self.trim();
    }

    /// Ports' MACs moved (balance-alb swaps the active slave's with the next one's): a client
    /// the host told port `from`'s MAC now sends to port `to`, which holds it, for each
    /// `(from, to)` at once.
    pub fn follow_macs(&mut self, moved: &[(PortIndex, PortIndex)]) {
        // Asked on every batch of netlink messages: nothing to do is the common case.
        if moved.is_empty() {
            return;
        }
        let map = |mask: u64| {
            (0..MAX_PORT)
                .filter(|p| mask & bit(*p) != 0)
                .fold(0u64, |m, p| {
                    let to = moved.iter().find(|(f, _)| *f == p).map_or(p, |(_, t)| *t);
                    m | if to < MAX_PORT { bit(to) } else { 0 }
                })
        };
        for e in self.map.values_mut() {
            let ports = map(e.ports);
            self.changed |= ports != e.ports;
            e.ports = ports;
        }
        let casts: Vec<((u16, PortIndex), u64)> = self.broadcasts.drain().collect();
        for ((vlan, p), at) in casts {
            let to = moved.iter().find(|(f, _)| *f == p).map_or(p, |(_, t)| *t);
            self.broadcasts.insert((vlan, to), at);
        }
    }

    /// Forgets the clients told longest ago past the bound.
    fn trim(&mut self) {
        forget_oldest(&mut self.map, self.bound, |e| e.stamp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Mac;
    use std::net::Ipv4Addr;

    const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

    fn key(n: u8) -> ClientKey {
        ClientKey::untagged(Mac(2, 0, 0, 0, 0, n))
    }

    fn claim(n: u8) -> Claim {
        Claim::V4 {
            client: Ipv4Addr::new(198, 18, 1, n),
            server: SERVER,
        }
    }

    fn keys(v: &[Stranded]) -> Vec<(ClientKey, PortIndex)> {
        v.iter().map(|s| (s.key, s.port)).collect()
    }

    #[test]
    fn a_round_of_answers_on_several_ports_counts_each_and_a_later_one_replaces_them() {
        let mut a = Answered::new(16);
        // A broadcast request answered on p0 and p2 within the round.
        a.note(1000, key(1), 0, claim(1));
        a.note(1003, key(1), 2, claim(1));
        assert_eq!(keys(&a.on_ports(&[0])), vec![(key(1), 0)]);
        assert_eq!(keys(&a.on_ports(&[2])), vec![(key(1), 2)]);
        assert!(a.on_ports(&[1]).is_empty());
        // Re-resolved later, answered on p1 only: p0 and p2 no longer hold it.
        a.note(5000, key(1), 1, claim(1));
        assert!(a.on_ports(&[0, 2]).is_empty());
        assert_eq!(keys(&a.on_ports(&[1])), vec![(key(1), 1)]);
        assert_eq!(a.on_ports(&[1])[0].claims, vec![claim(1)]);
    }

    #[test]
    fn frames_counted_since_before_the_last_answer_do_not_replace_it() {
        let mut a = Answered::new(16);
        // Told p0, then p1 within the round; frames counted on p2 since between the two may
        // predate the second answer: the round stands.
        a.note(1000, key(1), 0, claim(1));
        a.note(1130, key(1), 1, claim(1));
        a.counted(&key(1), 2, 1001);
        assert_eq!(keys(&a.on_ports(&[1])), vec![(key(1), 1)]);
        assert!(a.on_ports(&[2]).is_empty());
        // Frames counted since after it: the client sends where they arrive.
        a.counted(&key(1), 2, 1131);
        assert!(a.on_ports(&[0, 1]).is_empty());
        assert_eq!(keys(&a.on_ports(&[2])), vec![(key(1), 2)]);
    }

    #[test]
    fn a_broadcast_adds_its_port_to_every_client_told_before_it_on_its_vlan() {
        let mut a = Answered::new(16);
        a.note(1000, key(1), 0, claim(1));
        let other_vlan = ClientKey::new(Mac(2, 0, 0, 0, 0, 2), 100);
        a.note(1000, other_vlan, 0, claim(2));
        a.broadcast(2000, 0, 1);
        assert_eq!(keys(&a.on_ports(&[1])), vec![(key(1), 1)]);
        // Answered again after the broadcast: that round is what it holds.
        a.note(9000, key(1), 0, claim(1));
        assert!(a.on_ports(&[1]).is_empty());
        assert_eq!(keys(&a.on_ports(&[0])).len(), 2);
    }

    #[test]
    fn claims_are_one_per_server_address_and_bounded() {
        let mut a = Answered::new(16);
        a.note(0, key(1), 0, claim(1));
        a.note(10, key(1), 0, claim(1));
        assert_eq!(a.on_ports(&[0])[0].claims.len(), 1);
        for n in 0..6u8 {
            let c = Claim::V4 {
                client: Ipv4Addr::new(198, 18, 1, 1),
                server: Ipv4Addr::new(198, 18, 0, 10 + n),
            };
            a.note(20, key(1), 0, c);
        }
        assert_eq!(a.on_ports(&[0])[0].claims.len(), MAX_CLAIMS);
    }

    #[test]
    fn the_client_told_longest_ago_is_forgotten_past_the_bound() {
        let mut a = Answered::new(3);
        for n in 1..=3 {
            a.note(u64::from(n), key(n), 0, claim(n));
        }
        // key(1) told again: key(2) is now the oldest.
        a.note(10, key(1), 0, claim(1));
        a.note(11, key(4), 0, claim(4));
        let left: Vec<ClientKey> = a.on_ports(&[0]).iter().map(|s| s.key).collect();
        assert_eq!(left, vec![key(1), key(3), key(4)]);
        // A storm of answers to a few clients keeps the bound.
        for t in 0..10_000u64 {
            a.note(100 + t, key(1 + (t % 3) as u8), 0, claim(1));
        }
        assert!(a.len() <= 3);
        a.set_bound(1);
        assert_eq!(a.len(), 1);
    }

    #[test]
    fn forgotten_and_untracked_ports_are_never_named() {
        let mut a = Answered::new(16);
        a.note(0, key(1), 0, claim(1));
        a.forget(&key(1));
        a.note(0, key(2), MAX_PORT, claim(2));
        a.broadcast(0, 0, MAX_PORT + 3);
        assert!(a.on_ports(&[0, MAX_PORT, MAX_PORT + 3]).is_empty());
        assert!(a.is_empty());
    }
}
