//! rlbd's copy of what the kernel knows about the server: its links, its addresses and its
//! confirmed neighbours, both families, per interface. Updated only by applying netlink events;
//! asked by the steering core the questions that keep it safe on the wire: is this address the
//! server's, which confirmed neighbour is behind this MAC, which server address do we claim
//! toward this client.
//!
//! Pure: no sockets, no clock.

use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnetwork::IpNetwork;

use crate::config::Target;
use crate::netlink::{LinkInfo, NeighEntry, NlEvent};
use crate::Mac;

/// What a client's latest frames told us: its source and the server address it sent to, per
/// family (from the client table; unverified wire data until the view confirms it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Talk {
    pub v4: Option<(Ipv4Addr, Ipv4Addr)>,
    pub v6: Option<(Ipv6Addr, Ipv6Addr)>,
}

impl Talk {
    /// What a client's earlier claims say it talks to (for a moved client quiet this second).
    pub fn from_claims(claims: &[Claim]) -> Talk {
        let mut t = Talk::default();
        for c in claims {
            match *c {
                Claim::V4 { client, server } => t.v4 = t.v4.or(Some((client, server))),
                Claim::V6 { client, server } => t.v6 = t.v6.or(Some((client, server))),
            }
        }
        t
    }
}

/// One address the server claims toward one client: a gratuitous-form ARP reply (IPv4) or an
/// unsolicited Neighbor Advertisement (IPv6) for `server`, sent to the client at `client`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Claim {
    V4 { client: Ipv4Addr, server: Ipv4Addr },
    V6 { client: Ipv6Addr, server: Ipv6Addr },
}

impl Claim {
    pub fn client(&self) -> IpAddr {
        match *self {
            Claim::V4 { client, .. } => client.into(),
            Claim::V6 { client, .. } => client.into(),
        }
    }
    pub fn server(&self) -> IpAddr {
        match *self {
            Claim::V4 { server, .. } => server.into(),
            Claim::V6 { server, .. } => server.into(),
        }
    }
}

/// What applying one event changed, for the shell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    /// A link appeared, went, or changed in a way the port list depends on (not just counters).
    pub links: bool,
}

#[derive(Debug, Clone)]
pub struct HostView {
    target: Target,
    links: HashMap<u32, LinkInfo>,
    addrs: BTreeSet<(u32, IpNetwork)>,
    /// Confirmed neighbours: (ifindex, IP) -> MAC, and the same indexed by MAC.
    neigh: HashMap<(u32, IpAddr), Mac>,
    by_mac: HashMap<Mac, BTreeSet<(u32, IpAddr)>>,
    /// Interfaces whose addresses and neighbours are the server's (derived from the links).
    host_ifs: BTreeSet<u32>,
}

impl HostView {
    pub fn new(target: Target) -> Self {
        HostView {
            target,
            links: HashMap::new(),
            addrs: BTreeSet::new(),
            neigh: HashMap::new(),
            by_mac: HashMap::new(),
            host_ifs: BTreeSet::new(),
        }
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Brings the view up to date with one event from the kernel.
    pub fn apply(&mut self, ev: &NlEvent) -> Applied {
        let mut applied = Applied::default();
        match ev {
            NlEvent::Link(l) => {
                let old = self.links.insert(l.index, l.clone());
                applied.links = old.is_none_or(|o| shape_changed(&o, l));
            }
            NlEvent::LinkRemoved { index, .. } => {
                applied.links = self.links.remove(index).is_some();
                self.forget_interface(*index);
            }
            NlEvent::Neigh(n) => self.set_neigh(n, true),
            NlEvent::NeighRemoved(n) => self.set_neigh(n, false),
            NlEvent::Addr(a) => {
                self.addrs.insert((a.ifindex, a.network));
            }
            NlEvent::AddrRemoved(a) => {
                self.addrs.remove(&(a.ifindex, a.network));
            }
            NlEvent::DumpDone | NlEvent::Overrun => {}
        }
        if applied.links {
            self.host_ifs = self.derive_host_ifs();
        }
        applied
    }

    /// A removed interface takes its addresses and neighbours with it (the kernel does not
    /// always send their removals first).
    fn forget_interface(&mut self, ifindex: u32) {
        self.addrs.retain(|(i, _)| *i != ifindex);
        let gone: Vec<(u32, IpAddr)> = self
            .neigh
            .keys()
            .filter(|(i, _)| *i == ifindex)
            .copied()
            .collect();
        for key in gone {
            self.unlink_neigh(key);
        }
    }

    fn set_neigh(&mut self, n: &NeighEntry, present: bool) {
        let key = (n.ifindex, n.ip);
        self.unlink_neigh(key);
        if let Some(mac) = n.mac.filter(|_| present && n.is_confirmed()) {
            self.neigh.insert(key, mac);
            self.by_mac.entry(mac).or_default().insert(key);
        }
    }

    fn unlink_neigh(&mut self, key: (u32, IpAddr)) {
        if let Some(old) = self.neigh.remove(&key) {
            if let Some(set) = self.by_mac.get_mut(&old) {
                set.remove(&key);
                if set.is_empty() {
                    self.by_mac.remove(&old);
                }
            }
        }
    }

    fn derive_host_ifs(&self) -> BTreeSet<u32> {
        match &self.target {
            Target::Bond(name) => self
                .links
                .values()
                .filter(|l| &l.name == name && l.kind.as_deref() == Some("bond"))
                .map(|l| l.index)
                .collect(),
            Target::Ports(names) => self
                .links
                .values()
                .filter(|l| names.contains(&l.name))
                .map(|l| l.index)
                .collect(),
        }
    }

    pub fn links(&self) -> &HashMap<u32, LinkInfo> {
        &self.links
    }

    /// True for an interface whose addresses and neighbours are the server's.
    pub fn is_host_if(&self, ifindex: u32) -> bool {
        self.host_ifs.contains(&ifindex)
    }

    /// True for one of the server's own addresses (on one of its interfaces).
    pub fn is_ours(&self, ip: IpAddr) -> bool {
        self.addrs
            .iter()
            .any(|(ifx, n)| n.ip() == ip && self.is_host_if(*ifx))
    }

    /// The server's addresses, for the status and the log.
    pub fn our_addresses(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.addrs
            .iter()
            .filter(|(ifx, _)| self.is_host_if(*ifx))
            .map(|(_, n)| n.ip())
    }

    /// True when the kernel's neighbour table, on one of the server's interfaces, has `ip` at
    /// `mac` in a confirmed state: the only kind of client rlbd ever sends a frame to.
    pub fn confirms(&self, mac: Mac, ip: IpAddr) -> bool {
        self.by_mac
            .get(&mac)
            .is_some_and(|set| set.iter().any(|(ifx, i)| *i == ip && self.is_host_if(*ifx)))
    }

    /// True when `mac` is a confirmed neighbour of the server for any address.
    pub fn knows(&self, mac: Mac) -> bool {
        self.by_mac
            .get(&mac)
            .is_some_and(|set| set.iter().any(|(ifx, _)| self.is_host_if(*ifx)))
    }

    /// The lowest confirmed IPv4 neighbour address with this MAC on the server's interfaces.
    pub fn confirmed_v4(&self, mac: Mac) -> Option<Ipv4Addr> {
        self.by_mac
            .get(&mac)?
            .iter()
            .find_map(|(ifx, ip)| match ip {
                IpAddr::V4(v4) if self.is_host_if(*ifx) => Some(*v4),
                _ => None,
            })
    }

    /// The server address to claim toward an IPv4 client: the one it talks to when that is
    /// ours, else ours in the client's subnet. Never an address that is not the server's.
    pub fn server_v4_for(&self, client: Ipv4Addr, talks_to: Option<Ipv4Addr>) -> Option<Ipv4Addr> {
        if let Some(ip) = talks_to.filter(|ip| self.is_ours((*ip).into())) {
            return Some(ip);
        }
        self.addrs
            .iter()
            .filter(|(ifx, _)| self.is_host_if(*ifx))
            .find_map(|(_, n)| match n {
                IpNetwork::V4(n) if n.contains(client) => Some(n.ip()),
                _ => None,
            })
    }

    /// What to claim toward the client at `mac`, from what it sends: for IPv4, its confirmed
    /// neighbour address and the server address it talks to (or ours in its subnet); for IPv6,
    /// its source and destination when the destination is ours and the kernel confirms the
    /// source at this MAC. Empty for a MAC the kernel does not confirm.
    pub fn claims_for(&self, mac: Mac, talk: &Talk) -> Vec<Claim> {
        let mut claims = Vec::new();
        if let Some(client) = self.confirmed_v4(mac) {
            if let Some(server) = self.server_v4_for(client, talk.v4.map(|(_, dst)| dst)) {
                claims.push(Claim::V4 { client, server });
            }
        }
        if let Some((client, server)) = talk.v6 {
            if self.is_ours(server.into()) && self.confirms(mac, client.into()) {
                claims.push(Claim::V6 { client, server });
            }
        }
        claims
    }

    /// True while a claim may still be sent: the address is the server's and the kernel still
    /// confirms the client at this MAC.
    pub fn allows(&self, mac: Mac, claim: &Claim) -> bool {
        self.is_ours(claim.server()) && self.confirms(mac, claim.client())
    }
}

/// True when a link notification changes what the port list depends on (not just counters).
fn shape_changed(a: &LinkInfo, b: &LinkInfo) -> bool {
    a.name != b.name
        || a.mac != b.mac
        || a.admin_up != b.admin_up
        || a.oper_up != b.oper_up
        || a.master != b.master
        || a.kind != b.kind
        || a.bond != b.bond
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
