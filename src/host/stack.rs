//! Which interfaces carry the server's own addresses: the bond (or the named ports), the bridge
//! the bond is a port of, and what is stacked on those — 802.1Q VLANs, macvlans, ipvlans. Each
//! maps to the VLAN its frames carry on the wire; a shape rlbd cannot steer is named with why.
//!
//! Pure: derived from the links alone, again whenever a link changes.

use std::collections::{BTreeMap, HashMap};

use crate::config::Target;
use crate::netlink::{LinkInfo, LinkKind};

/// The server's interfaces, and the shapes on the bond that rlbd cannot steer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stack {
    /// ifindex -> the VLAN (0: untagged) its frames carry on the bond's ports.
    pub vlan_of: BTreeMap<u32, u16>,
    /// (interface, why) for each interface on the bond whose clients rlbd cannot steer.
    pub unsupported: Vec<(String, String)>,
}

pub fn derive(target: &Target, links: &HashMap<u32, LinkInfo>) -> Stack {
    let mut s = Stack::default();
    match target {
        Target::Ports(names) => {
            for l in links.values().filter(|l| names.contains(&l.name)) {
                s.vlan_of.insert(l.index, 0);
            }
        }
        Target::Bond(name) => {
            let Some(bond) = links
                .values()
                .find(|l| &l.name == name && l.kind == Some(LinkKind::Bond))
            else {
                return s;
            };
            s.vlan_of.insert(bond.index, 0);
            // A hypervisor host's address sits on the bridge whose port the bond is: the driver
            // delivers frames for any slave's MAC to the bridge as its own (bond_handle_frame
            // rewrites the destination for a bridge port in balance-alb).
            if let Some(br) = bond.master.and_then(|m| links.get(&m)) {
                if br.kind == Some(LinkKind::Bridge) {
                    s.vlan_of.insert(br.index, 0);
                }
            }
        }
    }
    // Stacks are shallow; a pass per level until nothing changes.
    loop {
        let mut grew = false;
        let mut order: Vec<&LinkInfo> = links.values().collect();
        order.sort_by_key(|l| l.index);
        for l in order {
            if s.vlan_of.contains_key(&l.index) {
                continue;
            }
            let Some(&below) = l.parent.and_then(|p| s.vlan_of.get(&p)) else {
                continue;
            };
            let parent = l
                .parent
                .and_then(|p| links.get(&p))
                .map_or("?", |p| &p.name);
            match (&l.kind, l.vlan) {
                (Some(LinkKind::Vlan), Some(v)) if v.ad => {
                    let why = format!(
                        "an 802.1ad (QinQ) VLAN {} over {parent}: rlbd steers untagged and \
                         802.1Q clients only; carry that service VLAN on another interface",
                        v.id
                    );
                    note_unsupported(&mut s, &l.name, why);
                }
                (Some(LinkKind::Vlan), Some(v)) if below != 0 => {
                    let why = format!(
                        "VLAN {} inside VLAN {below} ({parent}): rlbd sends one 802.1Q tag",
                        v.id
                    );
                    note_unsupported(&mut s, &l.name, why);
                }
                (Some(LinkKind::Vlan), Some(v)) => {
                    s.vlan_of.insert(l.index, v.id);
                    grew = true;
                }
                (Some(kind), _) if kind.is_mac_stacked() => {
                    s.vlan_of.insert(l.index, below);
                    grew = true;
                }
                _ => {}
            }
        }
        if !grew {
            break;
        }
    }
    s.unsupported.sort();
    s
}

fn note_unsupported(s: &mut Stack, name: &str, why: String) {
    if !s.unsupported.iter().any(|(n, _)| n == name) {
        s.unsupported.push((name.to_string(), why));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::VlanInfo;

    fn l(index: u32, name: &str, kind: &str) -> LinkInfo {
        LinkInfo {
            index,
            name: name.into(),
            kind: Some(kind.into()),
            ..LinkInfo::default()
        }
    }

    fn vlan(index: u32, name: &str, parent: u32, id: u16, ad: bool) -> LinkInfo {
        LinkInfo {
            parent: Some(parent),
            vlan: Some(VlanInfo { id, ad }),
            ..l(index, name, "vlan")
        }
    }

    fn derive_of(links: Vec<LinkInfo>) -> Stack {
        let map = links.into_iter().map(|l| (l.index, l)).collect();
        derive(&Target::Bond("bond0".into()), &map)
    }

    #[test]
    fn vlans_macvlans_and_the_bridge_over_the_bond_are_the_servers() {
        let mut bond = l(10, "bond0", "bond");
        bond.master = Some(20);
        let s = derive_of(vec![
            bond,
            l(20, "br0", "bridge"),
            vlan(21, "br0.300", 20, 300, false),
            vlan(11, "bond0.100", 10, 100, false),
            vlan(12, "bond0.200", 10, 200, false),
            LinkInfo {
                parent: Some(10),
                ..l(13, "mv0", "macvlan")
            },
            LinkInfo {
                parent: Some(11),
                ..l(14, "mv100", "macvlan")
            },
            LinkInfo {
                parent: Some(99),
                ..l(15, "eth9.100", "vlan")
            },
            l(16, "vmport", "veth"),
        ]);
        let want: BTreeMap<u32, u16> = [
            (10, 0),
            (20, 0),
            (21, 300),
            (11, 100),
            (12, 200),
            (13, 0),
            (14, 100),
        ]
        .into_iter()
        .collect();
        assert_eq!(s.vlan_of, want);
        assert!(s.unsupported.is_empty());
    }

    #[test]
    fn qinq_and_nested_vlans_are_named_with_why() {
        let s = derive_of(vec![
            l(10, "bond0", "bond"),
            vlan(11, "bond0.100", 10, 100, false),
            vlan(12, "bond0.100.5", 11, 5, false),
            vlan(13, "svc", 10, 300, true),
        ]);
        assert_eq!(s.vlan_of.get(&11), Some(&100));
        assert!(!s.vlan_of.contains_key(&12) && !s.vlan_of.contains_key(&13));
        let names: Vec<&str> = s.unsupported.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["bond0.100.5", "svc"]);
        assert!(
            s.unsupported[1].1.contains("802.1ad"),
            "{:?}",
            s.unsupported
        );
    }

    #[test]
    fn no_bond_no_interfaces() {
        let s = derive_of(vec![
            l(11, "bond1", "bond"),
            vlan(12, "bond1.5", 11, 5, false),
        ]);
        assert!(s.vlan_of.is_empty());
    }
}
