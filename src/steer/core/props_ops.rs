//! The events a property run is made of, and the addressing of its four clients (odd ones on
//! VLAN 100, each with IPv4 and IPv6 addresses).

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;
use crate::client::ServerSet;
use crate::host::testing::*;
use crate::host::Talk;

use super::props_harness::CLIENTS;

pub(super) fn mac(c: usize) -> Mac {
    Mac(2, 0, 0, 0, 0x10, c as u8)
}
/// Odd clients are on VLAN 100 (bond0.100), even ones untagged.
pub(super) fn vlan(c: usize) -> u16 {
    if c % 2 == 1 {
        100
    } else {
        0
    }
}
pub(super) fn key(c: usize) -> ClientKey {
    ClientKey::new(mac(c), vlan(c))
}
pub(super) fn ifx(c: usize) -> u32 {
    if vlan(c) == 0 {
        BOND
    } else {
        VLAN_IF
    }
}
pub(super) fn ip4(c: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, vlan(c) as u8, 20 + c as u8)
}
/// 2001:db8::/64 untagged, 2001:db8:100::/64 on VLAN 100.
pub(super) fn net6(c: usize) -> u16 {
    if vlan(c) == 0 {
        0
    } else {
        0x100
    }
}
pub(super) fn ip6(c: usize) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, net6(c), 0, 0, 0, 0, 0x20 + c as u16)
}
pub(super) fn server4(c: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, vlan(c) as u8, 1)
}
pub(super) fn server6(c: usize) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, net6(c), 0, 0, 0, 0, 1)
}
pub(super) fn talk(c: usize, v6: bool) -> Talk {
    let mut servers = ServerSet::default();
    servers.note(server4(c).into(), 0, 0);
    if v6 {
        servers.note(server6(c).into(), 0, 0);
    }
    Talk {
        v4: Some(ip4(c)),
        v6: v6.then_some(ip6(c)),
        servers,
    }
}

#[derive(Debug, Clone)]
pub(super) enum Op {
    Move {
        c: usize,
        to: usize,
        failover: bool,
        v6: bool,
    },
    /// The host answers client `c`'s ARP from port `p` (with `p`'s MAC), `n` times at once.
    HostReply {
        c: usize,
        p: usize,
        n: usize,
    },
    HostBroadcast {
        p: usize,
        n: usize,
        vlan: u16,
    },
    ClientAsks {
        c: usize,
        n: usize,
    },
    HostNa {
        p: usize,
        multicast: bool,
        c: usize,
        n: usize,
    },
    ClientSolicits {
        c: usize,
        n: usize,
    },
    /// The kernel's entry for `c` (IPv4 or IPv6) becomes confirmed or fails.
    Neigh {
        c: usize,
        v6: bool,
        ok: bool,
    },
    /// The server's IPv4 or IPv6 address is removed or added back.
    Addr {
        v6: bool,
        present: bool,
    },
    PortDown(usize),
    PortUp(usize),
    /// The kernel starts or stops refusing every frame sent on a port (its queue full, or
    /// down before the link's notification arrives).
    Refusing {
        p: usize,
        on: bool,
    },
    MacChanged(usize),
    Rebalance {
        hot: usize,
        rates: [u8; CLIENTS],
        on: [usize; CLIENTS],
    },
    Advance(u64),
    Forget {
        active: [bool; CLIENTS],
    },
}

pub(super) fn op() -> impl Strategy<Value = Op> {
    let c = 0..CLIENTS;
    let p = 0..3usize;
    let n = 1..5usize;
    prop_oneof![
        3 => (c.clone(), p.clone(), any::<bool>(), any::<bool>())
            .prop_map(|(c, to, failover, v6)| Op::Move { c, to, failover, v6 }),
        2 => (c.clone(), p.clone(), n.clone()).prop_map(|(c, p, n)| Op::HostReply { c, p, n }),
        1 => (p.clone(), n.clone(), prop_oneof![Just(0u16), Just(100u16)])
            .prop_map(|(p, n, vlan)| Op::HostBroadcast { p, n, vlan }),
        2 => (c.clone(), n.clone()).prop_map(|(c, n)| Op::ClientAsks { c, n }),
        1 => (p.clone(), any::<bool>(), c.clone(), n.clone())
            .prop_map(|(p, multicast, c, n)| Op::HostNa { p, multicast, c, n }),
        1 => (c.clone(), n).prop_map(|(c, n)| Op::ClientSolicits { c, n }),
        2 => (c.clone(), any::<bool>(), any::<bool>()).prop_map(|(c, v6, ok)| Op::Neigh { c, v6, ok }),
        1 => (any::<bool>(), any::<bool>()).prop_map(|(v6, present)| Op::Addr { v6, present }),
        1 => p.clone().prop_map(Op::PortDown),
        1 => p.clone().prop_map(Op::PortUp),
        1 => p.clone().prop_map(Op::MacChanged),
        1 => (p.clone(), any::<bool>()).prop_map(|(p, on)| Op::Refusing { p, on }),
        2 => (p.clone(), any::<[u8; CLIENTS]>(), proptest::array::uniform4(p))
            .prop_map(|(hot, rates, on)| Op::Rebalance { hot, rates, on }),
        4 => (0..3000u64).prop_map(Op::Advance),
        1 => any::<[bool; CLIENTS]>().prop_map(|active| Op::Forget { active }),
    ]
}
