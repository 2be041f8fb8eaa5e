//! rlbd's copy of what the kernel knows about the server: its links, its addresses and its
//! confirmed neighbours, both families, per interface. Updated only by applying netlink events;
//! asked by the steering core the questions that keep it safe on the wire: is this address the
//! server's, which confirmed neighbour is behind this MAC, which server address do we claim
//! toward this client.
//!
//! Pure: no sockets, no clock.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnetwork::IpNetwork;

use super::stack::{self, Stack};
use crate::client::{ClientKey, ServerSet};
use crate::config::Target;
use crate::netlink::{LinkInfo, NeighEntry, NlEvent};
use crate::Mac;

/// What a client's frames told us: its latest source per family and the server addresses it
/// sent to (from the client table; unverified wire data until the view confirms it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Talk {
    pub v4: Option<Ipv4Addr>,
    pub v6: Option<Ipv6Addr>,
    pub servers: ServerSet,
}

impl Talk {
    /// What a client's earlier claims say it talks to (for a moved client quiet this second).
    pub fn from_claims(claims: &[Claim]) -> Talk {
        let mut t = Talk::default();
        for c in claims {
            match *c {
                Claim::V4 { client, server } => {
                    t.v4 = t.v4.or(Some(client));
                    t.servers.note(server.into(), 0, 0);
                }
                Claim::V6 { client, server } => {
                    t.v6 = t.v6.or(Some(client));
                    t.servers.note(server.into(), 0, 0);
                }
            }
        }
        t
    }
}

/// Why a client cannot be moved whole: the claims a move needs, or why there are none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unclaimable {
    /// The kernel's neighbour table has no confirmed entry for this MAC on the client's VLAN.
    NotConfirmed,
    /// It talks to `server` but the kernel confirms no address of that family at its MAC.
    NoNeighbour { server: IpAddr },
    /// It talks to more of the server's addresses than a move claims.
    TooManyAddresses,
    /// Its traffic to `server` is routed through the server, and the server has no address in
    /// the client's subnet on its VLAN to claim instead.
    NoOnLinkAddress { server: IpAddr },
    /// It talks to `server`, an address on `interface`, which is not stacked on the bond.
    Unwatched { server: IpAddr, interface: String },
}

impl fmt::Display for Unclaimable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unclaimable::NotConfirmed => write!(f, "no confirmed neighbour entry"),
            Unclaimable::NoNeighbour { server } => write!(
                f,
                "it talks to {server} but the kernel confirms none of its addresses of that family"
            ),
            Unclaimable::TooManyAddresses => write!(
                f,
                "it talks to more than {} of the server's addresses",
                ServerSet::MAX
            ),
            Unclaimable::NoOnLinkAddress { server } => write!(
                f,
                "its traffic to {server} is routed, with no server address on its subnet to claim"
            ),
            Unclaimable::Unwatched { server, interface } => write!(
                f,
                "it talks to {server} on {interface}, which is not on the bond (rlbd watches only \
                 the bond and what is stacked on it)"
            ),
        }
    }
}

/// One address the server claims toward one client: a gratuitous-form ARP reply (IPv4) or an
/// unsolicited Neighbor Advertisement (IPv6) for `server`, sent to the client at `client`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
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
    /// Interfaces whose addresses and neighbours are the server's, with their VLANs (derived
    /// from the links).
    stack: Stack,
}

impl HostView {
    pub fn new(target: Target) -> Self {
        HostView {
            target,
            links: HashMap::new(),
            addrs: BTreeSet::new(),
            neigh: HashMap::new(),
            by_mac: HashMap::new(),
            stack: Stack::default(),
        }
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Brings the view up to date with one event from the kernel.
    pub fn apply(&mut self, ev: &NlEvent) -> Applied {
        let mut applied = Applied::default();
        match ev {
            // Each port's counters come as a link message every second: the known link is
            // updated in place (no allocation).
            NlEvent::Link(l) => match self.links.get_mut(&l.index) {
                Some(old) => {
                    applied.links = shape_changed(old, l);
                    old.update_from(l);
                }
                None => {
                    self.links.insert(l.index, l.clone());
                    applied.links = true;
                }
            },
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
            // guests: taken by the guests table (issue 38)
            NlEvent::Fdb(_) | NlEvent::FdbRemoved(_) => {}
            NlEvent::DumpDone | NlEvent::Overrun => {}
        }
        if applied.links {
            self.stack = stack::derive(&self.target, &self.links);
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

    pub fn links(&self) -> &HashMap<u32, LinkInfo> {
        &self.links
    }

    /// True for an interface whose addresses and neighbours are the server's.
    pub fn is_host_if(&self, ifindex: u32) -> bool {
        self.stack.vlan_of.contains_key(&ifindex)
    }

    /// The VLAN (0: untagged) of one of the server's interfaces.
    pub fn vlan_of(&self, ifindex: u32) -> Option<u16> {
        self.stack.vlan_of.get(&ifindex).copied()
    }

    /// The server's interfaces: ifindex -> VLAN.
    pub fn host_ifs(&self) -> impl Iterator<Item = (u32, u16)> + '_ {
        self.stack.vlan_of.iter().map(|(i, v)| (*i, *v))
    }

    /// Interfaces on the bond whose clients rlbd cannot steer, with why.
    pub fn unsupported(&self) -> &[(String, String)] {
        &self.stack.unsupported
    }

    /// The MACs the server's own frames are addressed to, besides the ports' (a macvlan's, a
    /// bridge's of its own): the capture must count those frames as the server's load too.
    pub fn host_macs(&self) -> Vec<Mac> {
        let mut macs: Vec<Mac> = self
            .stack
            .vlan_of
            .keys()
            .filter_map(|i| self.links.get(i)?.mac)
            .collect();
        macs.sort();
        macs.dedup();
        macs
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

    /// The interface that holds `ip`, whichever it is (for telling an operator that a client's
    /// traffic goes to an interface rlbd does not steer).
    pub fn owner_of(&self, ip: IpAddr) -> Option<&str> {
        let (ifx, _) = self.addrs.iter().find(|(_, n)| n.ip() == ip)?;
        self.links.get(ifx).map(|l| l.name.as_str())
    }

    /// Confirmed neighbours (both families) on the server's interfaces, for the status.
    pub fn confirmed_neighbours(&self) -> usize {
        self.neigh
            .keys()
            .filter(|(ifx, _)| self.is_host_if(*ifx))
            .count()
    }

    /// The server's neighbour entries at `key`'s MAC on interfaces of its VLAN.
    fn entries_of(&self, key: ClientKey) -> impl Iterator<Item = IpAddr> + '_ {
        self.by_mac
            .get(&key.mac)
            .into_iter()
            .flatten()
            .filter(move |(ifx, _)| self.vlan_of(*ifx) == Some(key.vlan))
            .map(|(_, ip)| *ip)
    }

    /// True when the kernel's neighbour table, on one of the server's interfaces of the client's
    /// VLAN, has `ip` at its MAC in a confirmed state: the only kind of client rlbd ever sends a
    /// frame to.
    pub fn confirms(&self, key: ClientKey, ip: IpAddr) -> bool {
        self.entries_of(key).any(|i| i == ip)
    }

    /// True when `key` is a confirmed neighbour of the server for any address.
    pub fn knows(&self, key: ClientKey) -> bool {
        self.entries_of(key).next().is_some()
    }

    /// The lowest confirmed IPv4 neighbour address of `key`.
    pub fn confirmed_v4(&self, key: ClientKey) -> Option<Ipv4Addr> {
        self.entries_of(key).find_map(|ip| match ip {
            IpAddr::V4(v4) => Some(v4),
            IpAddr::V6(_) => None,
        })
    }

    fn confirmed_v6(&self, key: ClientKey, prefer: Option<Ipv6Addr>) -> Option<Ipv6Addr> {
        if let Some(p) = prefer.filter(|p| self.confirms(key, (*p).into())) {
            return Some(p);
        }
        self.entries_of(key).find_map(|ip| match ip {
            IpAddr::V6(v6) => Some(v6),
            IpAddr::V4(_) => None,
        })
    }

    /// True when `ip` is the server's on an interface of VLAN `vlan`: a client there reaches
    /// it on-link, by the MAC it resolved for it.
    pub fn on_link(&self, ip: IpAddr, vlan: u16) -> bool {
        self.addrs
            .iter()
            .any(|(ifx, n)| n.ip() == ip && self.vlan_of(*ifx) == Some(vlan))
    }

    /// The server's address in `client`'s subnet on VLAN `vlan`: the next hop a client uses
    /// for what it sends through the server.
    fn gateway_for(&self, client: IpAddr, vlan: u16) -> Option<IpAddr> {
        self.addrs
            .iter()
            .find(|(ifx, n)| self.vlan_of(*ifx) == Some(vlan) && n.contains(client))
            .map(|(_, n)| n.ip())
    }

    fn gateway_claim_v4(&self, client: Ipv4Addr, vlan: u16) -> Option<Claim> {
        match self.gateway_for(client.into(), vlan)? {
            IpAddr::V4(server) => Some(Claim::V4 { client, server }),
            IpAddr::V6(_) => None,
        }
    }

    fn gateway_claim_v6(&self, client: Ipv6Addr, vlan: u16) -> Option<Claim> {
        match self.gateway_for(client.into(), vlan)? {
            IpAddr::V6(server) => Some(Claim::V6 { client, server }),
            IpAddr::V4(_) => None,
        }
    }

    /// Everything a move of `key` must claim so that all of its traffic follows: one claim per
    /// server address it talks to on-link, and for traffic routed through the server, the
    /// server's address in its subnet. An error when any part cannot be claimed: a move that
    /// would leave part of a client's traffic behind is not made.
    pub fn claims_for(&self, key: ClientKey, talk: &Talk) -> Result<Vec<Claim>, Unclaimable> {
        let mut claims = Vec::new();
        self.each_claim(key, talk, |c| {
            if !claims.contains(&c) {
                claims.push(c);
            }
        })?;
        Ok(claims)
    }

    /// Whether [`claims_for`](Self::claims_for) would succeed, without building the claims
    /// (asked of every client every second).
    pub fn can_claim(&self, key: ClientKey, talk: &Talk) -> bool {
        self.each_claim(key, talk, |_| {}).is_ok()
    }

    /// Whether `key` can be claimed whole and some claim is not among `known` (a moved client
    /// that started talking to another of the server's addresses), without building the claims.
    pub fn claims_beyond(&self, key: ClientKey, talk: &Talk, known: &[Claim]) -> bool {
        let mut new = false;
        self.each_claim(key, talk, |c| new |= !known.contains(&c))
            .is_ok()
            && new
    }

    /// Hands each of `key`'s claims to `f` (a routed one may come twice), or says why one
    /// cannot be made.
    fn each_claim(
        &self,
        key: ClientKey,
        talk: &Talk,
        mut f: impl FnMut(Claim),
    ) -> Result<(), Unclaimable> {
        if !self.knows(key) {
            return Err(Unclaimable::NotConfirmed);
        }
        if talk.servers.overflowed() {
            return Err(Unclaimable::TooManyAddresses);
        }
        let v4 = talk
            .v4
            .filter(|s| self.confirms(key, (*s).into()))
            .or_else(|| self.confirmed_v4(key));
        let v6 = self.confirmed_v6(key, talk.v6);
        let mut made = 0;
        let mut routed = [None; ServerSet::MAX + 1];
        for (i, server) in talk.servers.iter().enumerate() {
            if !self.on_link(server, key.vlan) {
                routed[i] = Some(server);
                continue;
            }
            let no = Unclaimable::NoNeighbour { server };
            made += 1;
            f(match server {
                IpAddr::V4(server) => Claim::V4 {
                    client: v4.ok_or(no)?,
                    server,
                },
                IpAddr::V6(server) => Claim::V6 {
                    client: v6.ok_or(no)?,
                    server,
                },
            });
        }
        if let Some(other) = talk.servers.other() {
            if let Some(name) = self.owner_of(other).filter(|_| !self.is_ours(other)) {
                return Err(Unclaimable::Unwatched {
                    server: other,
                    interface: name.to_string(),
                });
            }
            routed[ServerSet::MAX] = Some(other);
        }
        for via in routed.into_iter().flatten() {
            let claim = if via.is_ipv4() {
                v4.and_then(|client| self.gateway_claim_v4(client, key.vlan))
            } else {
                v6.and_then(|client| self.gateway_claim_v6(client, key.vlan))
            };
            made += 1;
            f(claim.ok_or(Unclaimable::NoOnLinkAddress { server: via })?);
        }
        // Quiet (a moved client between bursts): the next hop in its subnet, as the driver
        // would have answered for.
        if talk.servers.is_empty() && talk.servers.other().is_none() {
            if let Some(c) = v4.and_then(|client| self.gateway_claim_v4(client, key.vlan)) {
                made += 1;
                f(c);
            }
        }
        if made == 0 {
            return Err(Unclaimable::NotConfirmed);
        }
        Ok(())
    }

    /// True while a claim may still be sent: the address is the server's and the kernel still
    /// confirms the client at this MAC on its VLAN.
    pub fn allows(&self, key: ClientKey, claim: &Claim) -> bool {
        self.is_ours(claim.server()) && self.confirms(key, claim.client())
    }
}

/// True when a link notification changes what the port list depends on (not just counters).
fn shape_changed(a: &LinkInfo, b: &LinkInfo) -> bool {
    // The carrier count changes only when the carrier does: the port table keeps it, and a
    // rise it did not see as down and up is a flap (`Change::Flapped`).
    a.carrier_changes != b.carrier_changes
        || a.name != b.name
        || a.mac != b.mac
        || a.admin_up != b.admin_up
        || a.oper_up != b.oper_up
        || a.master != b.master
        || a.kind != b.kind
        || a.bond != b.bond
        || a.parent != b.parent
        || a.vlan != b.vlan
}

#[cfg(test)]
mod tests;
