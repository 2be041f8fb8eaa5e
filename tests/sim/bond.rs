//! The bonding driver's receive load balancing (balance-alb's rlb), as drivers/net/bonding's
//! bond_alb.c does it, reduced to what a client sees: the host's ARP answer to a client leaves
//! through the slave the driver assigned to that client's address (round robin on first sight,
//! kept after), with that slave's MAC; a slave that fails has its clients reassigned and told;
//! a slave that comes up makes the driver deal every client round again and tell each one; a
//! probe of the host's own goes out with the bond's MAC and the driver answers it with an update
//! to the client's assigned slave a little later. IPv6 is not balanced: Neighbor Discovery
//! answers carry the bond's MAC (slave 0's, which the simulation never fails, so no MAC swap).
//! The bond carries VLAN 100 (bond0.100) for some clients.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use rlbd::netlink::{BondInfo, BondMode, LinkInfo, NlEvent, VlanInfo};
use rlbd::Mac;

pub const BOND_IF: u32 = 20;
pub const VLAN_IF: u32 = 21;
pub const VLAN_ID: u16 = 100;
/// The server's address on bond0.100.
pub const SERVER_V: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
/// How long after a host probe the driver sends the client its update (RLB_UPDATE_DELAY).
pub const UPDATE_DELAY_MS: u64 = 2_000;

#[derive(Debug, Default)]
pub struct Rlb {
    /// Client address -> the slave assigned to it (rx_hashtbl).
    table: BTreeMap<Ipv4Addr, usize>,
    /// The next slave of the round robin.
    next: usize,
}

impl Rlb {
    /// The slave for `ip`: its assigned one while that is up, else the next up slave in turn.
    pub fn choose(&mut self, ip: Ipv4Addr, up: &[bool]) -> Option<usize> {
        if let Some(&s) = self.table.get(&ip).filter(|s| up[**s]) {
            return Some(s);
        }
        let s = self.turn(up)?;
        self.table.insert(ip, s);
        Some(s)
    }

    fn turn(&mut self, up: &[bool]) -> Option<usize> {
        let n = up.len();
        let s = (0..n).map(|k| (self.next + k) % n).find(|s| up[*s])?;
        self.next = (s + 1) % n;
        Some(s)
    }

    /// The slave `ip` is assigned to, if any.
    pub fn assigned(&self, ip: Ipv4Addr) -> Option<usize> {
        self.table.get(&ip).copied()
    }

    /// A slave failed (rlb_clear_slave): its clients go to other slaves in turn; the ones to
    /// tell, with their new slave.
    pub fn clear_slave(&mut self, failed: usize, up: &[bool]) -> Vec<(Ipv4Addr, usize)> {
        let moved: Vec<Ipv4Addr> = self
            .table
            .iter()
            .filter(|(_, s)| **s == failed)
            .map(|(ip, _)| *ip)
            .collect();
        let mut told = Vec::new();
        for ip in moved {
            match self.turn(up) {
                Some(s) => {
                    self.table.insert(ip, s);
                    told.push((ip, s));
                }
                None => {
                    self.table.remove(&ip);
                }
            }
        }
        told
    }

    /// A slave came up (rlb_rebalance): every client dealt round again; each is told.
    pub fn rebalance(&mut self, up: &[bool]) -> Vec<(Ipv4Addr, usize)> {
        let ips: Vec<Ipv4Addr> = self.table.keys().copied().collect();
        ips.into_iter()
            .filter_map(|ip| {
                let s = self.turn(up)?;
                self.table.insert(ip, s);
                Some((ip, s))
            })
            .collect()
    }
}

/// bond0 (balance-alb, slave 0's MAC) and bond0.100 on it.
pub fn bond_links(mac: Mac) -> [NlEvent; 2] {
    let bond = LinkInfo {
        index: BOND_IF,
        name: "bond0".into(),
        mac: Some(mac),
        admin_up: true,
        oper_up: true,
        kind: Some("bond".into()),
        bond: Some(BondInfo {
            mode: BondMode::BalanceAlb,
            all_slaves_active: Some(false),
            arp_validate: None,
        }),
        ..LinkInfo::default()
    };
    let vlan = LinkInfo {
        index: VLAN_IF,
        name: "bond0.100".into(),
        mac: Some(mac),
        admin_up: true,
        oper_up: true,
        kind: Some("vlan".into()),
        parent: Some(BOND_IF),
        vlan: Some(VlanInfo {
            id: VLAN_ID,
            ad: false,
        }),
        ..LinkInfo::default()
    };
    [NlEvent::Link(bond), NlEvent::Link(vlan)]
}

/// The 802.1Q tag of a frame, 0 when untagged, and the frame without it.
pub fn untag(bytes: &[u8]) -> (u16, Vec<u8>) {
    if bytes.len() >= 18 && bytes[12..14] == [0x81, 0x00] {
        let id = u16::from_be_bytes([bytes[14], bytes[15]]) & 0x0fff;
        let mut f = bytes[..12].to_vec();
        f.extend_from_slice(&bytes[16..]);
        (id, f)
    } else {
        (0, bytes.to_vec())
    }
}
