//! What happens to the server's links, and what the bonding driver does about it
//! (drivers/net/bonding's bond_main.c and bond_alb.c): a carrier lost or back, and with it the
//! active slave chosen anew and its MAC swapped with the bond's (bond_alb_handle_active_change);
//! a slave renamed while up (its ifindex stays); a slave released from the bond and a new one
//! enslaved. Each is told to the engine as the kernel tells it (link messages) and to the clients
//! as the driver tells them (its ARP updates).

use std::net::Ipv4Addr;

use crate::Mac;

use super::bond::BOND_IF;
use super::ports::Port;
use super::{ToEngine, World};

/// The ifindex of the first slave enslaved while the run goes (clear of the bond's and VLAN's).
const FIRST_NEW_IFINDEX: u32 = 40;

impl World {
    /// Port `p`'s carrier goes down or comes back.
    pub fn set_carrier(&mut self, now: u64, p: usize, up: bool) {
        let port = &mut self.ports[p];
        if port.up != up {
            port.carrier_changes += 1;
        }
        port.up = up;
        if up {
            port.up_since = now;
        } else {
            port.down_since = now;
        }
        let ev = vec![self.port_link(p)];
        self.to_engine.push(ToEngine::Netlink(ev));
        self.slave_changed(now, p);
    }

    /// A slave's carrier changed: the bond's driver deals its clients anew (bond_alb_handle_
    /// link_change), picks the active slave anew when it lost it, and tells the clients.
    fn slave_changed(&mut self, now: u64, p: usize) {
        if self.rlb.is_none() {
            return;
        }
        let slaves = self.slaves();
        let rlb = self.rlb.as_mut().expect("a bond");
        let told = if slaves[p].0 {
            rlb.rebalance(&slaves)
        } else {
            rlb.clear_slave(p, &slaves)
        };
        self.tell(now, told);
    }

    /// bond_select_active_slave: when the active slave is no longer usable, the first usable
    /// one becomes active and takes the bond's MAC from whichever slave holds it, giving that
    /// one its own (alb_swap_mac_addr); the kernel tells both new MACs, and the driver tells the
    /// clients of the usable one (alb_fasten_mac_swap). It follows the carrier's own message
    /// (the engine may act on that one first). True when MACs moved.
    pub fn reselect_active(&mut self, now: u64) -> bool {
        let Some(rlb) = self.rlb.as_ref() else {
            return false;
        };
        if rlb.active.is_some_and(|a| self.ports[a].live()) {
            return false;
        }
        let new = self.ports.iter().position(Port::live);
        self.rlb.as_mut().expect("a bond").active = new;
        let Some(n) = new else {
            return false;
        };
        let bond_mac = self.bond_mac;
        let holder = self
            .ports
            .iter()
            .position(|p| p.enslaved && p.mac == bond_mac);
        let changed = match holder {
            Some(h) if h == n => return false,
            Some(h) => {
                self.ports[h].mac = self.ports[n].mac;
                self.ports[n].mac = bond_mac;
                vec![h, n]
            }
            None => {
                self.ports[n].mac = bond_mac;
                vec![n]
            }
        };
        for &p in &changed {
            self.ports[p].mac_since = now;
        }
        let ev = changed.iter().map(|p| self.port_link(*p)).collect();
        self.to_engine.push(ToEngine::Netlink(ev));
        let rlb = self.rlb.as_ref().expect("a bond");
        let told = changed
            .into_iter()
            .filter(|p| self.ports[*p].live())
            .flat_map(|p| rlb.clients_of(p))
            .collect();
        self.tell(now, told);
        true
    }

    /// The clients of `told` are to hear their slave (the driver's `ntt`): it tells them on its
    /// next round, after a swap of MACs that came with the change.
    fn tell(&mut self, _now: u64, told: Vec<(Ipv4Addr, usize)>) {
        self.rlb_ntt.extend(told.into_iter().map(|(ip, _)| ip));
    }

    /// The driver's round (rlb_update_rx_clients): each client to tell hears its assigned
    /// slave, from that slave, with the MAC it has now.
    pub fn rlb_round(&mut self, now: u64) {
        for ip in std::mem::take(&mut self.rlb_ntt) {
            let slave = self.rlb.as_ref().and_then(|r| r.assigned(ip));
            let c = self.clients.iter().position(|c| c.present && c.ip == ip);
            if let (Some(c), Some(s)) = (c, slave) {
                self.rlb_update(now, c, s);
            }
        }
    }

    /// The driver's updates that follow a probe of the host's, but for the clients of the slave
    /// with the bond's MAC, which the probe itself put there (rlb_req_update_subnet_clients).
    pub fn rlb_followups(&mut self, now: u64) {
        let due: Vec<usize> = self
            .rlb_due
            .iter()
            .filter(|(t, _)| *t <= now)
            .map(|(_, c)| *c)
            .collect();
        self.rlb_due.retain(|(t, _)| *t > now);
        for c in due {
            let ip = self.clients[c].ip;
            let assigned = self.rlb.as_ref().and_then(|r| r.assigned(ip));
            if let Some(s) = assigned.filter(|s| self.ports[*s].mac != self.bond_mac) {
                self.rlb_update(now, c, s);
            }
        }
    }

    /// A slave renamed while up (`ip link set p1 name lan1`): its ifindex, MAC and carrier
    /// stay. The new name.
    pub fn rename(&mut self, p: usize) -> String {
        let name = format!("lan{}", self.ports[p].ifindex);
        self.ports[p].name = name.clone();
        let ev = vec![self.port_link(p)];
        self.to_engine.push(ToEngine::Netlink(ev));
        name
    }

    /// A slave released from the bond (`ip link set p2 nomaster`): it carries nothing more;
    /// the driver deals its clients to the others (bond_alb_deinit_slave). Only a slave that is
    /// not active and has its own MAC (else the driver would swap MACs on the way out).
    pub fn release(&mut self, now: u64, p: usize) -> bool {
        let active = self.rlb.as_ref().and_then(|r| r.active);
        let others = self
            .ports
            .iter()
            .enumerate()
            .filter(|(i, q)| *i != p && q.live())
            .count();
        let port = &self.ports[p];
        if active == Some(p) || !port.enslaved || port.mac != port.perm_mac || others == 0 {
            return false;
        }
        let port = &mut self.ports[p];
        port.enslaved = false;
        port.carrier_changes += u32::from(port.up);
        port.up = false;
        port.down_since = now;
        let ev = vec![self.port_link(p)];
        self.to_engine.push(ToEngine::Netlink(ev));
        let slaves = self.slaves();
        let rlb = self.rlb.as_mut().expect("a bond");
        rlb.released();
        let told = rlb.clear_slave(p, &slaves);
        self.tell(now, told);
        self.rlb_round(now);
        true
    }

    /// A new slave enslaved, up, with its own name, ifindex and MAC, at `capacity_mbps`: the
    /// driver deals every client round again (bond_alb_init_slave). Its index.
    pub fn enslave(&mut self, now: u64, capacity_mbps: f64) -> usize {
        let n = self.ports.len();
        let ifindex = FIRST_NEW_IFINDEX + n as u32;
        let mac = Mac(2, 0, 0, 0, 2, n as u8);
        let mut port = Port::made(format!("eth{ifindex}"), ifindex, mac);
        port.capacity_mbps = capacity_mbps;
        self.ports.push(port);
        let ev = vec![self.ports[n].link(Some(BOND_IF))];
        self.to_engine.push(ToEngine::Netlink(ev));
        self.slave_changed(now, n);
        self.rlb_round(now);
        n
    }
}
