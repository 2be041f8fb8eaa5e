//! The simulated LAN: ports, clients arriving and leaving with elastic demands, and the server
//! kernel's side of ARP (its neighbour table, its answers from every port, its own probes).
//! Everything the world says to the engine goes into `to_engine` as plain inputs (netlink
//! events, frames as real bytes) for the driver to hand in.

pub mod bond;
pub mod clients;
pub mod guest_path;
pub mod guests;
mod links;
pub mod nd;
mod population;
pub mod ports;
mod scripted;
pub mod server_arp;
pub mod switch;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use ipnetwork::IpNetwork;

use crate::netlink::{AddrEntry, NeighEntry, NlEvent};
use crate::Mac;

use crate::simulate::fair_share;
use crate::simulate::generate::Rng;
use bond::{bond_links, untag, Rlb, BOND_IF, VLAN_IF};
use clients::{arp_frame, Ask, Client, BROADCAST, MAX_POPULATION, SERVER};
use nd::{multicast_mac, na_frame, ns_frame, solicited_node, SERVER6};
use ports::Port;

/// How long the server's kernel keeps a neighbour it no longer hears from.
const NEIGH_GC_MS: u64 = 120_000;

/// What the world hands the engine.
pub enum ToEngine {
    Netlink(Vec<NlEvent>),
    /// Frame bytes, and whether the server sent it (outgoing).
    /// Frame bytes (untagged), whether the server sent it, and its VLAN.
    Frame(Vec<u8>, bool, u16),
}

#[derive(Debug, Clone, Copy)]
pub struct ServerNeigh {
    pub mac: Mac,
    pub heard: u64,
    /// The interface the entry is on (p0, bond0 or bond0.100).
    pub ifindex: u32,
}

pub struct World {
    pub rng: Rng,
    pub ports: Vec<Port>,
    pub clients: Vec<Client>,
    /// The server kernel's neighbour table (IPv4 and IPv6).
    pub neigh: HashMap<IpAddr, ServerNeigh>,
    pub to_engine: Vec<ToEngine>,
    /// Client MAC generation: a returning slot comes back with a new MAC (its address reused).
    pub generation: u32,
    /// Mean demand of a client, bit/s; the population aimed at.
    pub mean_demand: f64,
    pub population: usize,
    /// No client arrives, leaves or changes its demand (the balance rule's calm).
    pub calm: bool,
    /// The ports are slaves of bond0 in balance-alb, and this is its rlb.
    pub rlb: Option<Rlb>,
    /// The driver's updates due after a probe of the host's: (when, client).
    pub rlb_due: Vec<(u64, usize)>,
    /// The bond's MAC (the first slave's own): the active slave holds it.
    pub bond_mac: Mac,
    /// The clients the driver is to tell their slave on its next round.
    pub rlb_ntt: Vec<Ipv4Addr>,
    /// The guests behind the bond, on the seeds that have them (`guests.rs`).
    pub guests: Option<guests::GuestLan>,
    /// The server's addresses on its home interface (the bond, or the first port).
    pub server_nets: Vec<IpNetwork>,
    /// The bond carries VLAN 100 (bond0.100, the server at 198.18.1.1/24 there).
    pub bond_vlan: bool,
}

impl World {
    pub fn new(seed: u64, ports: usize, population: usize, bonded: bool) -> World {
        let mut rng = Rng::new(seed);
        let population = population.clamp(1, MAX_POPULATION);
        let mut ports: Vec<Port> = (0..ports).map(Port::new).collect();
        // Every third seed (1, 4, ...) has one port of a tenth or a quarter of the others'
        // capacity: the balance is of utilization, not of bytes.
        if seed % 3 == 1 {
            let slow = rng.below(ports.len() as u64) as usize;
            ports[slow].capacity_mbps /= if rng.chance(0.5) { 10.0 } else { 4.0 };
        }
        // Total demand around 60-90% of the ports' sum: overloads come from imbalance.
        let load = 0.6 + 0.3 * rng.unit();
        let capacity: f64 = ports.iter().map(Port::capacity_bps).sum();
        let mean_demand = load * capacity / population as f64;
        // Plain ports have no VLAN: their subnet is a /23, room for 300 clients.
        let nets: &[&str] = if bonded {
            &["198.18.0.1/24", "198.18.0.2/24", "2001:db8::1/64"]
        } else {
            &["198.18.0.1/23", "198.18.0.2/23", "2001:db8::1/64"]
        };
        let nets = nets.iter().map(|n| n.parse().expect("a network")).collect();
        World {
            bond_vlan: bonded,
            mean_demand,
            population,
            rlb: bonded.then(Rlb::with_active_first),
            ..World::bare(rng, ports, nets)
        }
    }

    /// `ports` with the server at `server_nets` and nothing else: no clients, no bond, no
    /// guests, nobody due to arrive. The constructors say what differs.
    fn bare(rng: Rng, ports: Vec<Port>, server_nets: Vec<IpNetwork>) -> World {
        World {
            bond_mac: ports.first().map_or(Mac::zero(), |p| p.mac),
            server_nets,
            rng,
            ports,
            clients: Vec::new(),
            neigh: HashMap::new(),
            to_engine: Vec::new(),
            generation: 0,
            mean_demand: 0.0,
            population: 0,
            calm: false,
            rlb: None,
            rlb_due: Vec::new(),
            rlb_ntt: Vec::new(),
            guests: None,
            bond_vlan: false,
        }
    }

    /// Everything the kernel would say in a dump: links, the address, the neighbours.
    pub fn dump(&self) -> Vec<NlEvent> {
        let mut ev: Vec<NlEvent> = (0..self.ports.len()).map(|p| self.port_link(p)).collect();
        let home = self.home_if(0);
        if self.rlb.is_some() {
            let [bond, vlan] = bond_links(self.bond_mac);
            ev.push(bond);
            if self.bond_vlan {
                ev.push(vlan);
                ev.push(NlEvent::Addr(AddrEntry {
                    ifindex: VLAN_IF,
                    network: "198.18.1.1/24".parse().unwrap(),
                }));
            }
        }
        for &network in &self.server_nets {
            ev.push(NlEvent::Addr(AddrEntry {
                ifindex: home,
                network,
            }));
        }
        self.guest_dump(&mut ev);
        let mut n: Vec<_> = self.neigh.iter().collect();
        n.sort_by_key(|(ip, _)| **ip);
        ev.extend(
            n.into_iter()
                .map(|(ip, e)| neigh_event(e.ifindex, *ip, e.mac, false)),
        );
        ev
    }

    /// Port `p`'s link message (a slave of bond0 when bonded).
    pub fn port_link(&self, p: usize) -> NlEvent {
        self.ports[p].link(self.rlb.as_ref().map(|_| BOND_IF))
    }

    /// The interface the server's addresses for VLAN `vlan` are on.
    fn home_if(&self, vlan: u16) -> u32 {
        match (self.rlb.is_some(), vlan) {
            (false, _) => self.ports[0].ifindex,
            (true, 0) => BOND_IF,
            (true, _) => VLAN_IF,
        }
    }

    /// True when the server's neighbour table has some address at `mac`.
    pub fn confirms(&self, mac: Mac) -> bool {
        self.neigh.values().any(|n| n.mac == mac)
    }

    /// True when the server's neighbour table has every address of client `c` at its MAC: rlbd
    /// moves a client whole or not at all.
    pub fn claimable(&self, c: &Client) -> bool {
        let v4 = self.confirms_at(IpAddr::V4(c.ip), c.mac);
        match c.ip6 {
            None => v4,
            Some(ip6) => self.confirms_at(IpAddr::V6(ip6), c.mac) && (v4 || !c.dual),
        }
    }

    /// True when the server's neighbour table has `ip` at `mac`.
    pub fn confirms_at(&self, ip: IpAddr, mac: Mac) -> bool {
        self.neigh.get(&ip).is_some_and(|n| n.mac == mac)
    }

    /// The port holding `mac` (a released slave keeps its own), if any.
    pub fn port_of_mac(&self, mac: Mac) -> Option<usize> {
        self.ports
            .iter()
            .position(|p| p.mac == mac && p.enslaved)
            .or_else(|| self.ports.iter().position(|p| p.mac == mac))
    }

    /// Each slave as the bond's round robin sees it: usable, and its speed.
    pub fn slaves(&self) -> Vec<(bool, f64)> {
        self.ports
            .iter()
            .map(|p| (p.live(), p.capacity_mbps))
            .collect()
    }

    /// The server kernel heard `ip` at `mac`: its entry made or refreshed, told on change.
    pub fn server_hears(&mut self, now: u64, ip: IpAddr, mac: Mac, vlan: u16) {
        let changed = self.neigh.get(&ip).is_none_or(|n| n.mac != mac);
        let ifindex = self.home_if(vlan);
        self.neigh.insert(
            ip,
            ServerNeigh {
                mac,
                heard: now,
                ifindex,
            },
        );
        if changed {
            let ev = neigh_event(ifindex, ip, mac, false);
            self.to_engine.push(ToEngine::Netlink(vec![ev]));
        }
    }

    /// Client `c` asks for the server's address. Plain ports each answer, in an order the switch
    /// decides (an IPv4 client takes the first, by locktime; an IPv6 one each in turn, by
    /// Override, so the last); a bond answers ARP from the slave its rlb assigns, and ND from
    /// the bond's MAC.
    fn client_asks(&mut self, now: u64, c: usize, to: Mac) {
        let cl = &self.clients[c];
        let (cmac, cip, cip6, server, vlan) = (cl.mac, cl.ip, cl.ip6, cl.server, cl.vlan);
        // A unicast probe to a port that is down reaches nobody.
        if to != BROADCAST && !self.ports.iter().any(|p| p.live() && p.mac == to) {
            return;
        }
        let (req, ip) = match cip6 {
            None => (
                arp_frame(to, 1, cmac, cip, Mac::zero(), server),
                IpAddr::V4(cip),
            ),
            Some(ip6) if to == BROADCAST => {
                let group = solicited_node(SERVER6);
                let f = ns_frame(multicast_mac(group), (cmac, ip6), group, SERVER6);
                (f, IpAddr::V6(ip6))
            }
            Some(ip6) => (ns_frame(to, (cmac, ip6), SERVER6, SERVER6), IpAddr::V6(ip6)),
        };
        self.to_engine.push(ToEngine::Frame(req, false, vlan));
        self.server_hears(now, ip, cmac, vlan);
        for p in self.answering(to, cip, cip6.is_some()) {
            let pmac = self.ports[p].mac;
            let reply = match cip6 {
                None => arp_frame(cmac, 2, pmac, server, cmac, cip),
                Some(ip6) => na_frame(cmac, (pmac, SERVER6), ip6, SERVER6, true, true),
            };
            self.to_engine
                .push(ToEngine::Frame(reply.clone(), true, vlan));
            if cip6.is_some() {
                self.clients[c].hear_na(now, pmac, true, true);
            } else {
                self.deliver_on(now, vlan, &reply);
            }
        }
    }

    /// The ports that answer a request to `to` from client address `ip`, in order.
    fn answering(&mut self, to: Mac, ip: Ipv4Addr, v6: bool) -> Vec<usize> {
        let up: Vec<bool> = self.ports.iter().map(Port::live).collect();
        let slaves = self.slaves();
        if let Some(rlb) = self.rlb.as_mut() {
            // ND is answered with the bond's MAC, which the active slave holds.
            let p = if v6 {
                rlb.active
            } else {
                rlb.choose(ip, &slaves)
            };
            return p.into_iter().filter(|p| up[*p]).collect();
        }
        let mut answering: Vec<usize> = (0..self.ports.len())
            .filter(|p| up[*p] && (to == BROADCAST || self.ports[*p].mac == to))
            .collect();
        // A Fisher-Yates shuffle: who answers first.
        for i in (1..answering.len()).rev() {
            answering.swap(i, self.rng.below(i as u64 + 1) as usize);
        }
        answering
    }

    /// A frame the server sent reached the wire (tagged for a VLAN client).
    pub fn deliver(&mut self, now: u64, bytes: &[u8]) {
        let (vlan, inner) = untag(bytes);
        self.deliver_on(now, vlan, &inner);
    }

    /// A frame of VLAN `vlan` reached the wire: the client it is for hears it.
    fn deliver_on(&mut self, now: u64, vlan: u16, bytes: &[u8]) {
        let on = |c: &Client, mac: Mac| c.present && c.mac == mac && c.vlan == vlan;
        match crate::capture::parse(bytes) {
            Some(crate::capture::Frame::Arp {
                eth_dst,
                op,
                sha,
                spa,
                tpa,
                ..
            }) => {
                let garp = spa == tpa;
                for cl in self.clients.iter_mut().filter(|c| on(c, eth_dst)) {
                    if cl.ip6.is_none() && cl.server == spa {
                        cl.hear(now, sha, op == 2, true, garp);
                    }
                }
            }
            Some(crate::capture::Frame::Nd {
                eth_dst,
                kind: crate::capture::NdKind::Na,
                target,
                override_flag,
                lladdr: Some(tll),
                ..
            }) if target == SERVER6 => {
                // The server's own answers are heard where they are made; what reaches here is
                // rlbd's unsolicited advertisement.
                for cl in self.clients.iter_mut().filter(|c| on(c, eth_dst)) {
                    if cl.ip6.is_some() {
                        cl.hear_na(now, tll, false, override_flag);
                    }
                }
            }
            _ => {}
        }
    }

    /// The bond's driver tells client `c` its assigned slave (rlb_update_client): a unicast ARP
    /// reply from that slave, which rlbd sees go out.
    pub fn rlb_update(&mut self, now: u64, c: usize, slave: usize) {
        let cl = &self.clients[c];
        if !cl.present || cl.ip6.is_some() || !self.ports[slave].live() {
            return;
        }
        let pmac = self.ports[slave].mac;
        let f = arp_frame(cl.mac, 2, pmac, cl.server, cl.mac, cl.ip);
        let vlan = cl.vlan;
        self.to_engine.push(ToEngine::Frame(f.clone(), true, vlan));
        self.deliver_on(now, vlan, &f);
    }

    /// A foreign host's gratuitous ARP for the server's address, broadcast: every client takes
    /// it (the gratuitous form overrides locktime) and sends there until its entry fails.
    pub fn foreign_claim(&mut self, now: u64, mac: Mac) {
        for cl in self
            .clients
            .iter_mut()
            .filter(|c| c.present && c.ip6.is_none() && c.server == SERVER && c.vlan == 0)
        {
            cl.hear(now, mac, true, false, true);
        }
    }

    /// One second of traffic ending at `now`: each client's delivered rate (fair share of the
    /// port its entry names, nothing on a port that is down), the ports' counters, and the
    /// per-port counts (port index, client, bytes).
    pub fn traffic(&mut self) -> Vec<(usize, usize, u64)> {
        let mut per_port: Vec<Vec<usize>> = vec![Vec::new(); self.ports.len()];
        for (i, c) in self.clients.iter_mut().enumerate() {
            c.delivered_bps = 0.0;
            if !c.present || c.demand_bps <= 0.0 {
                continue;
            }
            let port = c
                .target()
                .and_then(|m| self.ports.iter().position(|p| p.mac == m));
            if let Some(p) = port.filter(|p| self.ports[*p].live()) {
                per_port[p].push(i);
            }
        }
        let mut counts = Vec::new();
        for (p, on) in per_port.iter().enumerate() {
            let mut demands: Vec<f64> = on.iter().map(|c| self.clients[*c].demand_bps).collect();
            // The guests behind the bond share the slave (`guests.rs`).
            let guests = self.guest_demands(p);
            demands.extend(guests.iter().map(|g| g.1));
            let shares = fair_share(self.ports[p].capacity_bps(), &demands);
            self.guests_received(p, &guests, &shares[on.len()..]);
            for (c, got) in on.iter().zip(shares) {
                self.clients[*c].delivered_bps = got;
                let bytes = (got / 8.0) as u64;
                self.ports[p].rx_bytes += bytes;
                counts.push((p, *c, bytes));
            }
        }
        counts
    }

    /// The clients' neighbour timers, arrivals, departures and demand changes, once a second.
    pub fn tick_clients(&mut self, now: u64) {
        for c in 0..self.clients.len() {
            let confirmed = self.clients[c].delivered_bps > 0.0;
            match self.clients[c].tick(now, confirmed) {
                Ask::None => {}
                Ask::Broadcast => self.client_asks(now, c, BROADCAST),
                Ask::Unicast(m) => self.client_asks(now, c, m),
            }
            if confirmed {
                let cl = &self.clients[c];
                let (ip, mac) = (cl.ip6.map_or(IpAddr::V4(cl.ip), IpAddr::V6), cl.mac);
                let vlan = cl.vlan;
                // Its replies need the client resolved: a new entry is told (the server's ARP
                // exchange itself is not modelled).
                self.server_hears(now, ip, mac, vlan);
                // A dual-stack client's IPv4 stream is answered now and then: its entry lapses
                // at times while its IPv6 one lives (the server knows the MAC, not that address).
                if self.clients[c].dual && self.rng.chance(1.0 / 30.0) {
                    let v4 = self.clients[c].ip;
                    self.server_hears(now, IpAddr::V4(v4), mac, vlan);
                }
            }
            if !self.calm {
                self.churn(now, c);
            }
        }
        if self.clients.len() < self.population && !self.calm {
            let c = self.clients.len();
            let cl = self.arrival(now, c);
            self.clients.push(cl);
        }
        self.server_gc(now);
        self.rlb_followups(now);
    }

    /// Neighbours the server has not heard from for a while are forgotten.
    fn server_gc(&mut self, now: u64) {
        let mut gone: Vec<(IpAddr, Mac, u32)> = self
            .neigh
            .iter()
            .filter(|(_, n)| now >= n.heard + NEIGH_GC_MS)
            .map(|(ip, n)| (*ip, n.mac, n.ifindex))
            .collect();
        gone.sort();
        if gone.is_empty() {
            return;
        }
        let ev = gone
            .iter()
            .map(|(ip, mac, ifindex)| {
                self.neigh.remove(ip);
                neigh_event(*ifindex, *ip, *mac, true)
            })
            .collect();
        self.to_engine.push(ToEngine::Netlink(ev));
    }
}

fn neigh_event(ifindex: u32, ip: IpAddr, mac: Mac, removed: bool) -> NlEvent {
    let e = NeighEntry {
        ifindex,
        ip,
        mac: Some(mac),
        state: libc::NUD_REACHABLE,
    };
    if removed {
        NlEvent::NeighRemoved(e)
    } else {
        NlEvent::Neigh(e)
    }
}
