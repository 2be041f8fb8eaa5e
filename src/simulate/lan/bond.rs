//! The bonding driver's receive load balancing (balance-alb's rlb), as drivers/net/bonding's
//! bond_alb.c does it, reduced to what a client sees: the host's ARP answer to a client leaves
//! through the slave the driver assigned to that client's address (round robin on first sight,
//! kept after), with that slave's MAC; a slave that fails has its clients reassigned and told;
//! a slave that comes up makes the driver deal every client round again and tell each one; a
//! probe of the host's own goes out with the bond's MAC and the driver answers it with an update
//! to the client's assigned slave a little later. IPv6 is not balanced: Neighbor Discovery
//! answers carry the bond's MAC, which the active slave holds; when it fails, the driver swaps
//! MACs with the slave that becomes active (bond_alb_handle_active_change), and the clients of
//! the slave that took the bond's MAC are told anew. The round robin deals a client to the
//! fastest slave in turn (rlb_next_rx_slave): a slow slave gets none while a faster one is up.
//! The bond carries VLAN 100 (bond0.100) for some clients.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use crate::netlink::{BondInfo, BondMode, LinkInfo, NlEvent, VlanInfo};
use crate::Mac;

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
    /// The slave the round robin last chose (rx_slave).
    last: Option<usize>,
    /// The slave that carries the bond's MAC and the host's own frames (curr_active_slave).
    pub active: Option<usize>,
}

/// Each slave as the driver's round robin sees it: usable (up, still a slave), and its speed.
pub type Slaves = [(bool, f64)];

impl Rlb {
    /// A bond whose first slave is active (it holds the bond's MAC).
    pub fn with_active_first() -> Rlb {
        Rlb {
            active: Some(0),
            ..Rlb::default()
        }
    }

    /// The slave for `ip`: its assigned one while that is up, else the next slave in turn.
    pub fn choose(&mut self, ip: Ipv4Addr, slaves: &Slaves) -> Option<usize> {
        if let Some(&s) = self.table.get(&ip).filter(|s| slaves[**s].0) {
            return Some(s);
        }
        let s = self.turn(slaves)?;
        self.table.insert(ip, s);
        Some(s)
    }

    /// rlb_next_rx_slave: the fastest usable slave after the last one chosen, unless one up to
    /// it is faster (a slow slave is dealt no client while a faster one is up).
    fn turn(&mut self, slaves: &Slaves) -> Option<usize> {
        let (mut before, mut after, mut found) = (None::<usize>, None::<usize>, false);
        for (s, (ok, speed)) in slaves.iter().enumerate() {
            if !ok {
                continue;
            }
            if !found {
                if before.is_none_or(|b| slaves[b].1 < *speed) {
                    before = Some(s);
                }
            } else if after.is_none_or(|a| slaves[a].1 < *speed) {
                after = Some(s);
            }
            found |= Some(s) == self.last;
        }
        let pick = match (after, before) {
            (Some(a), Some(b)) if slaves[a].1 < slaves[b].1 => Some(b),
            (None, b) => b,
            (a, _) => a,
        };
        if pick.is_some() {
            self.last = pick;
        }
        pick
    }

    /// `ip` is assigned to `slave` already (a bond that was running before the story starts).
    pub fn assign(&mut self, ip: Ipv4Addr, slave: usize) {
        self.table.insert(ip, slave);
        self.last = Some(slave);
    }

    /// The slave `ip` is assigned to, if any.
    pub fn assigned(&self, ip: Ipv4Addr) -> Option<usize> {
        self.table.get(&ip).copied()
    }

    /// The clients assigned to `slave` (rlb_req_update_slave_clients: its MAC changed).
    pub fn clients_of(&self, slave: usize) -> Vec<(Ipv4Addr, usize)> {
        self.table
            .iter()
            .filter(|(_, s)| **s == slave)
            .map(|(ip, s)| (*ip, *s))
            .collect()
    }

    /// A slave failed or was released (rlb_clear_slave): its clients go to other slaves in
    /// turn; the ones to tell, with their new slave.
    pub fn clear_slave(&mut self, failed: usize, slaves: &Slaves) -> Vec<(Ipv4Addr, usize)> {
        let moved: Vec<Ipv4Addr> = self
            .table
            .iter()
            .filter(|(_, s)| **s == failed)
            .map(|(ip, _)| *ip)
            .collect();
        let mut told = Vec::new();
        for ip in moved {
            match self.turn(slaves) {
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

    /// A slave came up or was added (rlb_rebalance): every client dealt round again; each
    /// whose slave changed is told.
    pub fn rebalance(&mut self, slaves: &Slaves) -> Vec<(Ipv4Addr, usize)> {
        let ips: Vec<(Ipv4Addr, usize)> = self.table.iter().map(|(ip, s)| (*ip, *s)).collect();
        ips.into_iter()
            .filter_map(|(ip, was)| {
                let s = self.turn(slaves)?;
                self.table.insert(ip, s);
                (s != was).then_some((ip, s))
            })
            .collect()
    }

    /// A slave was released (bond_alb_deinit_slave): the round robin starts over.
    pub fn released(&mut self) {
        self.last = None;
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
