//! The server's ports: a name, an ifindex, a MAC (its own, or another slave's after balance-alb
//! swapped them), a capacity (some seeds have one slow port), whether the carrier is up, whether
//! it is still a slave of the bond, and the kernel's rx_bytes counter, told to the engine as
//! netlink link messages.

use crate::netlink::{LinkInfo, NlEvent};
use crate::Mac;

pub const CAPACITY_MBPS: f64 = 100.0;

#[derive(Debug, Clone)]
pub struct Port {
    pub name: String,
    pub ifindex: u32,
    /// Its current MAC, and the one it was made with (balance-alb gives a slave another's).
    pub mac: Mac,
    pub perm_mac: Mac,
    /// When its MAC last changed (0: never): a client's entry names the MAC, not the port.
    pub mac_since: u64,
    pub up: bool,
    /// Still a slave of the bond (always, on plain ports): a released one carries nothing.
    pub enslaved: bool,
    pub capacity_mbps: f64,
    /// When the carrier last went down (or the slave was released), and came back (0: up
    /// from the start, or since it was enslaved).
    pub down_since: u64,
    pub up_since: u64,
    pub rx_bytes: u64,
    /// The size of its packets, for the packet counter (the sampling ratio reads it).
    pub packet_bytes: f64,
    /// How often its carrier went down or came up (`IFLA_CARRIER_CHANGES`).
    pub carrier_changes: u32,
}

impl Port {
    pub fn new(i: usize) -> Port {
        Port::made(
            format!("p{i}"),
            2 + i as u32,
            Mac(2, 0, 0, 0, 1, 2 + i as u8),
        )
    }

    /// A port with its own name, ifindex and MAC, up, at the usual capacity.
    pub fn made(name: String, ifindex: u32, mac: Mac) -> Port {
        Port {
            name,
            ifindex,
            mac,
            perm_mac: mac,
            mac_since: 0,
            up: true,
            enslaved: true,
            capacity_mbps: CAPACITY_MBPS,
            down_since: 0,
            up_since: 0,
            rx_bytes: 0,
            packet_bytes: 1000.0,
            carrier_changes: 0,
        }
    }

    pub fn capacity_bps(&self) -> f64 {
        self.capacity_mbps * 1e6
    }

    /// Carries traffic: up, and a slave still.
    pub fn live(&self) -> bool {
        self.up && self.enslaved
    }

    /// Its link message; `master`: the bond it is a slave of (none once released).
    pub fn link(&self, master: Option<u32>) -> NlEvent {
        NlEvent::Link(LinkInfo {
            master: master.filter(|_| self.enslaved),
            index: self.ifindex,
            name: self.name.clone(),
            mac: Some(self.mac),
            admin_up: true,
            oper_up: self.up,
            rx_bytes: Some(self.rx_bytes),
            rx_packets: Some((self.rx_bytes as f64 / self.packet_bytes) as u64),
            carrier_changes: Some(self.carrier_changes),
            ..LinkInfo::default()
        })
    }
}
