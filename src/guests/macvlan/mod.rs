//! Containers on macvlans over the bond, usually moved into a network namespace of their own,
//! where the host's link dump does not show them. What the host's namespace does see: a macvlan
//! that is up has put its MAC on its lower device's unicast address list (`dev_uc_add`),
//! wherever the macvlan lives now, and an AF_BRIDGE dump reports that list as the device's own
//! (`self permanent`) entries. Nothing is notified when a macvlan comes, goes or moves
//! (measured on 6.1 and 6.12: docs/labs.md), so the daemon dumps the list again every
//! [`MACVLAN_DUMP_SECS`]; the netlink socket's resync turns an entry a dump no longer has into a
//! removal.
//!
//! Whose a MAC on that list is: one that an interface of the host's own namespace has (a
//! macvlan of the host's, a VLAN device with a MAC of its own) is the host's: its addresses are
//! the server's, its clients steered by ARP as any. Any other is a guest's: a macvlan in another
//! namespace. A macvlan over a VLAN of the bond puts its MAC on the VLAN device's list, which
//! passes it down to the bond's: the VLAN device's entry names the guest's VLAN, the bond's copy
//! of it is not a second guest.

use super::{FdbFact, GuestAction, Guests};
use crate::client::ClientKey;
use crate::netlink::FdbEntry;
use crate::policy::PortView;
use crate::Mac;

/// How often the daemon reads the address lists again (a full AF_BRIDGE dump) while guests are
/// enabled: the longest a new container waits, on the active slave, to be placed.
pub const MACVLAN_DUMP_SECS: u64 = 2;

/// A device's own entry as a macvlan guest: a unicast MAC on the list of `lowers` (the bond,
/// VLAN 0, and the 802.1Q VLAN devices over it, with their VLAN), that no interface of the
/// host's namespace has (`host_macs`). `None` for anything else.
pub fn macvlan_fact(
    e: &FdbEntry,
    lowers: &[(u32, u16)],
    host_macs: &[Mac],
    removed: bool,
) -> Option<FdbFact> {
    if !e.is_own_unicast() || host_macs.contains(&e.mac) {
        return None;
    }
    let &(dev, vlan) = lowers.iter().find(|(i, _)| *i == e.ifindex)?;
    Some(FdbFact {
        key: ClientKey::new(e.mac, vlan),
        bridge_port: dev,
        bridge: dev,
        learned: true,
        removed,
        macvlan: true,
    })
}

impl Guests {
    /// A macvlan guest's entry: learned (unless a bridge's guest has its MAC, or its VLAN's
    /// entry is known), or released once its MAC has left the list.
    pub(super) fn on_macvlan(
        &mut self,
        now: u64,
        f: &FdbFact,
        ports: &[PortView],
        out: &mut Vec<GuestAction>,
    ) {
        if self.cfg.excludes(f.key.mac) {
            return;
        }
        if f.removed {
            if self.list.get(&f.key).is_some_and(|g| g.macvlan) {
                self.release(
                    f.key,
                    "its macvlan left the bond (down, deleted or moved)",
                    out,
                );
            }
            return;
        }
        if self.list.contains_key(&f.key) {
            return;
        }
        let same_mac: Vec<(ClientKey, bool)> = self
            .list
            .values()
            .filter(|g| g.key.mac == f.key.mac)
            .map(|g| (g.key, g.macvlan))
            .collect();
        if same_mac.iter().any(|&(_, macvlan)| !macvlan) {
            return;
        }
        if f.key.vlan == 0 && !same_mac.is_empty() {
            // The bond's copy of a VLAN device's entry.
            return;
        }
        // The VLAN device's entry after the bond's copy of it (a dump lists the bond first):
        // the guest is the tagged one. Not a release: the guest did not go anywhere.
        for (key, _) in same_mac {
            self.list.remove(&key);
            out.push(GuestAction::Unpin { key });
        }
        self.learn(now, f, ports, out);
    }

    /// The bond and the VLAN devices over it, now: a macvlan guest whose lower device is no
    /// longer one of them is released (its entries went with the device, unannounced).
    pub fn set_lowers(&mut self, lowers: &[(u32, u16)], out: &mut Vec<GuestAction>) {
        let gone: Vec<ClientKey> = self
            .list
            .values()
            .filter(|g| g.macvlan && !lowers.iter().any(|&(i, _)| i == g.bridge))
            .map(|g| g.key)
            .collect();
        for key in gone {
            self.release(key, "its macvlan's device is no longer over the bond", out);
        }
    }

    /// Whether a macvlan guest is known (the guest path stays on for it without a bridge).
    pub fn has_macvlans(&self) -> bool {
        self.list.values().any(|g| g.macvlan)
    }
}

#[cfg(test)]
mod tests;
