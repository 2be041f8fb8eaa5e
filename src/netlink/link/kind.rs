//! What kind of device a link is (IFLA_INFO_KIND), as a type: the kinds rlbd looks at by name,
//! and every other kept as the kernel spells it.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LinkKind {
    Bond,
    Bridge,
    /// An 802.1Q or 802.1ad VLAN device.
    Vlan,
    Macvlan,
    Macvtap,
    Ipvlan,
    Ipvtap,
    Veth,
    /// Any other kind, as the kernel names it ("tun", "vxlan", ...).
    Other(String),
}

impl LinkKind {
    /// Devices stacked on another that share its wire and take a MAC (their own or its) on it.
    pub fn is_mac_stacked(&self) -> bool {
        matches!(
            self,
            LinkKind::Macvlan | LinkKind::Macvtap | LinkKind::Ipvlan | LinkKind::Ipvtap
        )
    }

    pub fn as_str(&self) -> &str {
        match self {
            LinkKind::Bond => "bond",
            LinkKind::Bridge => "bridge",
            LinkKind::Vlan => "vlan",
            LinkKind::Macvlan => "macvlan",
            LinkKind::Macvtap => "macvtap",
            LinkKind::Ipvlan => "ipvlan",
            LinkKind::Ipvtap => "ipvtap",
            LinkKind::Veth => "veth",
            LinkKind::Other(s) => s,
        }
    }
}

impl From<&str> for LinkKind {
    fn from(s: &str) -> LinkKind {
        match s {
            "bond" => LinkKind::Bond,
            "bridge" => LinkKind::Bridge,
            "vlan" => LinkKind::Vlan,
            "macvlan" => LinkKind::Macvlan,
            "macvtap" => LinkKind::Macvtap,
            "ipvlan" => LinkKind::Ipvlan,
            "ipvtap" => LinkKind::Ipvtap,
            "veth" => LinkKind::Veth,
            other => LinkKind::Other(other.to_string()),
        }
    }
}

impl fmt::Display for LinkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_as_the_kernel_spells_it() {
        for s in [
            "bond", "bridge", "vlan", "macvlan", "macvtap", "ipvlan", "ipvtap", "veth", "vxlan",
        ] {
            assert_eq!(LinkKind::from(s).as_str(), s);
        }
        assert_eq!(LinkKind::from("tun"), LinkKind::Other("tun".into()));
        assert!(LinkKind::Ipvtap.is_mac_stacked() && !LinkKind::Vlan.is_mac_stacked());
    }
}
