//! The server's ports: a name, an ifindex, a MAC, a capacity, whether the carrier is up, and the
//! kernel's rx_bytes counter, told to the engine as netlink link messages.

use rlbd::netlink::{LinkInfo, NlEvent};
use rlbd::Mac;

pub const CAPACITY_MBPS: f64 = 100.0;

#[derive(Debug, Clone)]
pub struct Port {
    pub name: String,
    pub ifindex: u32,
    pub mac: Mac,
    pub up: bool,
    /// When the carrier last went down.
    pub down_since: u64,
    pub rx_bytes: u64,
}

impl Port {
    pub fn new(i: usize) -> Port {
        Port {
            name: format!("p{i}"),
            ifindex: 2 + i as u32,
            mac: Mac(2, 0, 0, 0, 1, 2 + i as u8),
            up: true,
            down_since: 0,
            rx_bytes: 0,
        }
    }

    pub fn capacity_bps(&self) -> f64 {
        CAPACITY_MBPS * 1e6
    }

    /// Its link message; `master`: the bond it is a slave of.
    pub fn link(&self, master: Option<u32>) -> NlEvent {
        NlEvent::Link(LinkInfo {
            master,
            index: self.ifindex,
            name: self.name.clone(),
            mac: Some(self.mac),
            admin_up: true,
            oper_up: self.up,
            rx_bytes: Some(self.rx_bytes),
            rx_packets: Some(self.rx_bytes / 1000),
            ..LinkInfo::default()
        })
    }
}
