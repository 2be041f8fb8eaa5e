//! The server's own ARP and ND frames (net/ipv4/arp.c's arp_process,
//! net/ipv6/ndisc.c, drivers/net/bonding/bond_alb.c's rlb_arp_xmit):
//!
//! - **A broadcast request**, when the server resolves a client it has no entry for: it leaves
//!   the active slave with the bond's MAC (plain ports: the first port up, its own MAC). The
//!   client asked overrides its entry for the sender's address (neigh_event_ns); every other
//!   client on the VLAN with an entry for that address takes the sender's MAC too once its
//!   locktime has passed, STALE (arp_process: a request asserts no reachability and is not
//!   gratuitous unless its sender and target are one). On a bond the driver then marks every
//!   client of that address not on the bond's MAC for an update to its own slave
//!   (rlb_req_update_subnet_clients), sent after RLB_UPDATE_DELAY.
//! - **A re-announcement** of the server's addresses: a gratuitous ARP request (sender = target)
//!   per address, as `arp_notify` sends it on NETDEV_UP or NETDEV_CHANGEADDR and NETDEV_NOTIFY_PEERS
//!   always does, or a keepalived or NetworkManager after an address add (`arping -U`,
//!   `num_grat_arp`); every client with an entry takes the sender's MAC at once (a gratuitous one
//!   overrides locktime). With it an unsolicited Neighbor Advertisement of the IPv6 address to
//!   all-nodes, Override set (ndisc_send_unsol_na), which every IPv6 client takes.
//!
//! - **A unicast probe** of a client the server has not confirmed lately (NUD_PROBE): a request
//!   to the client's MAC, which moves that client to the sender's MAC (a request overrides).
//!
//! rlbd must put every client it moved back where it was (the `Reassertion` check).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::Mac;

use super::bond::{SERVER_V, UPDATE_DELAY_MS, VLAN_ID};
use super::clients::{arp_frame, Client, State, BROADCAST, LOCKTIME_MS, SERVER, SERVER_B};
use super::nd::{multicast_mac, na_frame, ns_frame, SERVER6};
use super::{ToEngine, World};

/// How often, on average, the server broadcasts a request, and re-announces its addresses.
pub const BROADCAST_MS: f64 = 600_000.0;
pub const REANNOUNCE_MS: f64 = 2.0 * 3_600_000.0;

impl Client {
    /// A broadcast ARP request from the server's address `spa` reached this client, which it
    /// does not ask for (arp_process): an entry of its own takes the sender's MAC only after
    /// locktime, or at once from a gratuitous one, and turns STALE. True when the MAC changed.
    pub fn hear_broadcast(&mut self, now: u64, sha: Mac, garp: bool) -> bool {
        let Some(e) = self.entry.as_mut() else {
            return false;
        };
        if e.mac == sha || !(garp || now >= e.updated + LOCKTIME_MS) {
            return false;
        }
        e.mac = sha;
        e.state = State::Stale;
        e.since = now;
        e.updated = now;
        e.probes = 0;
        true
    }
}

impl World {
    /// The MAC the host's own requests carry, if it can send: the bond's, out of the active
    /// slave; on plain ports the first port up's (its egress, as for its probes).
    fn host_sender(&self) -> Option<Mac> {
        match &self.rlb {
            Some(rlb) => rlb
                .active
                .filter(|a| self.ports[*a].live())
                .map(|_| self.bond_mac),
            None => self.ports.iter().find(|p| p.up).map(|p| p.mac),
        }
    }

    /// The server broadcasts a request for client `c`'s address. False when it cannot.
    pub fn server_broadcast(&mut self, now: u64, c: usize) -> bool {
        let Some(sha) = self.host_sender() else {
            return false;
        };
        let cl = &self.clients[c];
        if !cl.present || cl.ip6.is_some() {
            return false;
        }
        let (spa, tpa, vlan, mac) = (cl.server, cl.ip, cl.vlan, cl.mac);
        let f = arp_frame(BROADCAST, 1, sha, spa, Mac::zero(), tpa);
        self.to_engine.push(ToEngine::Frame(f, true, vlan));
        for (i, cl) in self.clients.iter_mut().enumerate() {
            if !cl.present || cl.ip6.is_some() || cl.vlan != vlan || cl.server != spa {
                continue;
            }
            if i == c {
                cl.hear(now, sha, false, false, false);
            } else {
                cl.hear_broadcast(now, sha, false);
            }
        }
        // The client answers; the server's entry for it is made.
        self.server_hears(now, IpAddr::V4(tpa), mac, vlan);
        self.rlb_subnet_update(now, spa);
        true
    }

    /// The server re-announces its addresses (gratuitous ARP, and an unsolicited NA).
    pub fn server_reannounce(&mut self, now: u64) -> bool {
        let Some(sha) = self.host_sender() else {
            return false;
        };
        let mut addrs = vec![(SERVER, 0), (SERVER_B, 0)];
        if self.rlb.is_some() {
            addrs.push((SERVER_V, VLAN_ID));
        }
        for (addr, vlan) in addrs {
            let f = arp_frame(BROADCAST, 1, sha, addr, Mac::zero(), addr);
            self.to_engine.push(ToEngine::Frame(f, true, vlan));
            for cl in self.clients.iter_mut() {
                if cl.present && cl.ip6.is_none() && cl.vlan == vlan && cl.server == addr {
                    cl.hear_broadcast(now, sha, true);
                }
            }
            self.rlb_subnet_update(now, addr);
        }
        let all = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
        let na = na_frame(
            multicast_mac(all),
            (sha, SERVER6),
            all,
            SERVER6,
            false,
            true,
        );
        self.to_engine.push(ToEngine::Frame(na, true, 0));
        for cl in self.clients.iter_mut() {
            if cl.present && cl.ip6.is_some() && cl.vlan == 0 {
                cl.hear_na(now, sha, false, true);
            }
        }
        true
    }

    /// rlb_req_update_subnet_clients: the clients of `spa` are told their own slave after the
    /// update delay (`rlb_followups` leaves out those on the bond's MAC).
    fn rlb_subnet_update(&mut self, now: u64, spa: Ipv4Addr) {
        if self.rlb.is_none() {
            return;
        }
        for (c, cl) in self.clients.iter().enumerate() {
            if cl.present && cl.ip6.is_none() && cl.server == spa {
                self.rlb_due.push((now + UPDATE_DELAY_MS, c));
            }
        }
    }

    /// The server kernel's own probe of a client it has not confirmed lately: a unicast request
    /// (ARP, or NS with its link-layer address) from the first up port (its egress), which
    /// moves the client there (a request overrides).
    pub fn server_probe(&mut self, now: u64, c: usize) {
        // On a bond, the host's own frames leave by the active slave, with the bond's MAC.
        let egress = match &self.rlb {
            Some(rlb) => rlb.active.filter(|a| self.ports[*a].live()),
            None => self.ports.iter().position(|p| p.up),
        };
        let Some(p) = egress else {
            return;
        };
        let cl = &self.clients[c];
        if !cl.present {
            return;
        }
        let pmac = self.ports[p].mac;
        let req = match cl.ip6 {
            None => arp_frame(cl.mac, 1, pmac, cl.server, Mac::zero(), cl.ip),
            Some(ip6) => ns_frame(cl.mac, (pmac, SERVER6), ip6, ip6),
        };
        let (vlan, v4) = (cl.vlan, cl.ip6.is_none());
        self.to_engine.push(ToEngine::Frame(req, true, vlan));
        let cl = &mut self.clients[c];
        cl.hear(now, pmac, false, true, false);
        // On a bond the request left with the bond's MAC; the driver sets the client right.
        if self.rlb.is_some() && v4 {
            self.rlb_due.push((now + UPDATE_DELAY_MS, c));
        }
    }
}
