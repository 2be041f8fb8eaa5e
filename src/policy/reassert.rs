//! Which moved clients an ARP or Neighbor Discovery frame on the wire puts at risk. Pure: the
//! daemon hands in the frame and where each moved client should be, and re-asserts whatever comes
//! back.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::capture::NdKind;
use crate::client::ClientKey;
use crate::Mac;

const BROADCAST: Mac = Mac(0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
pub(crate) const ARP_REQUEST: u16 = 1;
pub(crate) const ARP_REPLY: u16 = 2;

/// Why a client needs its update again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Risk {
    /// The host answered the client's ARP with another port's MAC (the kernel, or in
    /// balance-alb the bonding driver's rewrite).
    HostReplied,
    /// The host broadcast a request: every client that hears it takes the sender's MAC.
    HostBroadcast,
    /// The host asked the client directly (a neighbour probe) from another port.
    HostAsked,
    /// The client asked for the server's address: the host's answer is on its way.
    ClientAsked,
    /// The host advertised its IPv6 address to the client with another port's MAC.
    HostAdvertised,
    /// The host multicast an advertisement of its IPv6 address with another port's MAC.
    HostAdvertisedAll,
    /// The host sent the client a Neighbor Solicitation from another port.
    HostSolicited,
    /// The client solicited the server's IPv6 address: the host's answer is on its way.
    ClientSolicited,
}

impl Risk {
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::HostReplied => "the host answered its ARP",
            Risk::HostBroadcast => "the host broadcast an ARP request",
            Risk::HostAsked => "the host sent it an ARP request",
            Risk::ClientAsked => "it asked for the server's address",
            Risk::HostAdvertised => "the host sent it a Neighbor Advertisement",
            Risk::HostAdvertisedAll => "the host multicast a Neighbor Advertisement",
            Risk::HostSolicited => "the host sent it a Neighbor Solicitation",
            Risk::ClientSolicited => "it solicited the server's IPv6 address",
        }
    }
}

/// The fields of an ARP frame that matter here.
#[derive(Debug, Clone, Copy)]
pub struct ArpSeen {
    pub outgoing: bool,
    pub op: u16,
    pub eth_src: Mac,
    pub eth_dst: Mac,
    /// Sender hardware address: the MAC the frame tells its hearers to use for the sender.
    pub sha: Mac,
    /// Sender and target protocol addresses.
    pub spa: Ipv4Addr,
    pub tpa: Ipv4Addr,
    /// The VLAN it travels on (0: untagged): only clients on that VLAN hear it.
    pub vlan: u16,
}

/// The clients to re-assert. `assigned(client)` is the MAC of the port rlbd put the client on,
/// `None` for a client it did not move; `moved` lists every moved client (used for broadcasts).
/// A frame that already carries the assigned MAC (rlbd's own update, the right port's answer)
/// puts nobody at risk.
pub fn at_risk(
    f: &ArpSeen,
    assigned: impl Fn(&ClientKey) -> Option<Mac>,
    moved: impl Iterator<Item = ClientKey>,
) -> Vec<(ClientKey, Risk)> {
    let wrong = |client: &ClientKey| assigned(client).is_some_and(|want| want != f.sha);
    let (dst, src) = (
        ClientKey::new(f.eth_dst, f.vlan),
        ClientKey::new(f.eth_src, f.vlan),
    );
    match (f.outgoing, f.op) {
        (true, ARP_REPLY) if wrong(&dst) => vec![(dst, Risk::HostReplied)],
        (true, ARP_REQUEST) if f.eth_dst == BROADCAST => moved
            .filter(|m| m.vlan == f.vlan && wrong(m))
            .map(|m| (m, Risk::HostBroadcast))
            .collect(),
        (true, ARP_REQUEST) if wrong(&dst) => vec![(dst, Risk::HostAsked)],
        (false, ARP_REQUEST) if assigned(&src).is_some() => vec![(src, Risk::ClientAsked)],
        _ => Vec::new(),
    }
}

/// The fields of a Neighbor Solicitation or Advertisement that matter here.
#[derive(Debug, Clone, Copy)]
pub struct NdSeen {
    pub outgoing: bool,
    pub kind: NdKind,
    pub eth_src: Mac,
    pub eth_dst: Mac,
    pub target: Ipv6Addr,
    /// The packet's IPv6 source and destination.
    pub src_ip: Ipv6Addr,
    pub dst_ip: Ipv6Addr,
    /// The link-layer address option (source for an NS, target for an NA), if any.
    pub lladdr: Option<Mac>,
    /// The VLAN it travels on (0: untagged).
    pub vlan: u16,
}

/// The IPv6 sibling of [`at_risk`]. `ours(ip)` tells the server's own addresses;
/// `client_with(ip)` names the moved client using that IPv6 address (resolves a multicast NS to
/// the client it is for). What the frame tells its hearers to use for the sender (or for the
/// advertised target) is its link-layer option, else the Ethernet source.
///
/// - the host's NA for one of its addresses with another MAC than a moved client's assigned
///   port's, unicast to that client, or multicast (every moved client elsewhere);
/// - the host's NS to a moved client (unicast, or multicast for the client's address) from
///   another port's MAC: the client learns the sender's MAC from it;
/// - a moved client's own NS for one of the server's addresses.
pub fn nd_at_risk(
    f: &NdSeen,
    ours: impl Fn(&Ipv6Addr) -> bool,
    client_with: impl Fn(&Ipv6Addr, u16) -> Option<ClientKey>,
    assigned: impl Fn(&ClientKey) -> Option<Mac>,
    moved: impl Iterator<Item = ClientKey>,
) -> Vec<(ClientKey, Risk)> {
    let said = f.lladdr.unwrap_or(f.eth_src);
    let wrong = |client: &ClientKey| assigned(client).is_some_and(|want| want != said);
    let multicast = f.eth_dst.is_multicast();
    let (dst, src) = (
        ClientKey::new(f.eth_dst, f.vlan),
        ClientKey::new(f.eth_src, f.vlan),
    );
    match (f.outgoing, f.kind) {
        (true, NdKind::Na) if !ours(&f.target) => Vec::new(),
        (true, NdKind::Na) if multicast => moved
            .filter(|m| m.vlan == f.vlan && wrong(m))
            .map(|m| (m, Risk::HostAdvertisedAll))
            .collect(),
        (true, NdKind::Na) if wrong(&dst) => vec![(dst, Risk::HostAdvertised)],
        (true, NdKind::Ns) if multicast => client_with(&f.target, f.vlan)
            .filter(|c| wrong(c))
            .map(|c| vec![(c, Risk::HostSolicited)])
            .unwrap_or_default(),
        (true, NdKind::Ns) if wrong(&dst) => vec![(dst, Risk::HostSolicited)],
        (false, NdKind::Ns) if ours(&f.target) && assigned(&src).is_some() => {
            vec![(src, Risk::ClientSolicited)]
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const P0: Mac = Mac(2, 0, 0, 0, 1, 0);
    const P1: Mac = Mac(2, 0, 0, 0, 1, 1);
    const A: Mac = Mac(2, 0, 0, 0, 0, 0xa);
    const B: Mac = Mac(2, 0, 0, 0, 0, 0xb);
    const C: Mac = Mac(2, 0, 0, 0, 0, 0xc);

    fn untagged(v: Vec<(ClientKey, Risk)>) -> Vec<(Mac, Risk)> {
        let mut v: Vec<(Mac, Risk)> = v
            .into_iter()
            .map(|(k, r)| {
                assert_eq!(k.vlan, 0);
                (k.mac, r)
            })
            .collect();
        v.sort();
        v
    }

    /// A and B were moved to P1; C was never moved.
    fn check(f: ArpSeen) -> Vec<(Mac, Risk)> {
        let moved: HashMap<ClientKey, Mac> = [(A.into(), P1), (B.into(), P1)].into_iter().collect();
        untagged(at_risk(
            &f,
            |m| moved.get(m).copied(),
            moved.keys().copied(),
        ))
    }

    fn frame(outgoing: bool, op: u16, eth_src: Mac, eth_dst: Mac, sha: Mac) -> ArpSeen {
        ArpSeen {
            outgoing,
            op,
            eth_src,
            eth_dst,
            sha,
            spa: Ipv4Addr::UNSPECIFIED,
            tpa: Ipv4Addr::UNSPECIFIED,
            vlan: 0,
        }
    }

    #[test]
    fn a_frame_risks_only_clients_on_its_vlan() {
        // A moved on VLAN 100 and on VLAN 200 (one host, one MAC, two VLANs); B on VLAN 100.
        let moved: HashMap<ClientKey, Mac> = [
            (ClientKey::new(A, 100), P1),
            (ClientKey::new(A, 200), P1),
            (ClientKey::new(B, 100), P1),
        ]
        .into_iter()
        .collect();
        let run = |f: ArpSeen| {
            let mut v = at_risk(&f, |m| moved.get(m).copied(), moved.keys().copied());
            v.sort();
            v
        };
        let on = |vlan, f: ArpSeen| ArpSeen { vlan, ..f };
        assert_eq!(
            run(on(200, frame(true, ARP_REPLY, P0, A, P0))),
            vec![(ClientKey::new(A, 200), Risk::HostReplied)]
        );
        assert_eq!(
            run(on(100, frame(true, ARP_REQUEST, P0, BROADCAST, P0))),
            vec![
                (ClientKey::new(A, 100), Risk::HostBroadcast),
                (ClientKey::new(B, 100), Risk::HostBroadcast)
            ]
        );
        assert!(run(on(300, frame(true, ARP_REQUEST, P0, BROADCAST, P0))).is_empty());
        assert!(
            run(frame(true, ARP_REPLY, P0, A, P0)).is_empty(),
            "A untagged was not moved"
        );
    }

    #[test]
    fn host_reply_with_another_ports_mac_puts_the_client_at_risk() {
        assert_eq!(
            check(frame(true, ARP_REPLY, P0, A, P0)),
            vec![(A, Risk::HostReplied)]
        );
    }

    #[test]
    fn a_reply_that_carries_the_assigned_mac_is_harmless() {
        // rlbd's own update, or the right port answering in ports mode.
        assert!(check(frame(true, ARP_REPLY, P1, A, P1)).is_empty());
    }

    #[test]
    fn replies_to_clients_rlbd_never_moved_are_not_its_business() {
        assert!(check(frame(true, ARP_REPLY, P0, C, P0)).is_empty());
    }

    #[test]
    fn a_broadcast_request_from_the_host_risks_every_moved_client_elsewhere() {
        let v = check(frame(true, ARP_REQUEST, P0, BROADCAST, P0));
        assert_eq!(v, vec![(A, Risk::HostBroadcast), (B, Risk::HostBroadcast)]);
        assert!(
            check(frame(true, ARP_REQUEST, P1, BROADCAST, P1)).is_empty(),
            "sent from their own port"
        );
    }

    #[test]
    fn a_unicast_probe_from_another_port_risks_that_client_only() {
        assert_eq!(
            check(frame(true, ARP_REQUEST, P0, B, P0)),
            vec![(B, Risk::HostAsked)]
        );
    }

    #[test]
    fn a_moved_client_asking_for_the_server_is_about_to_be_answered() {
        assert_eq!(
            check(frame(false, ARP_REQUEST, A, BROADCAST, A)),
            vec![(A, Risk::ClientAsked)]
        );
        assert!(check(frame(false, ARP_REQUEST, C, BROADCAST, C)).is_empty());
    }

    #[test]
    fn incoming_replies_and_other_opcodes_risk_nobody() {
        assert!(check(frame(false, ARP_REPLY, A, P0, A)).is_empty());
        assert!(check(frame(true, 3, P0, A, P0)).is_empty());
    }

    const SERVER6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x77, 0, 0, 0, 0, 1);
    const OTHER6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x77, 0, 0, 0, 0, 0x99);
    const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x77, 0, 0, 0, 0, 0xa);
    const C6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x77, 0, 0, 0, 0, 0xc);
    const ALL_NODES: Mac = Mac(0x33, 0x33, 0, 0, 0, 1);
    const SOLICITED_A: Mac = Mac(0x33, 0x33, 0xff, 0, 0, 0xa);

    /// A and B were moved to P1; C was never moved. The server owns SERVER6; A uses A6, C C6.
    fn check6(f: NdSeen) -> Vec<(Mac, Risk)> {
        let moved: HashMap<ClientKey, Mac> = [(A.into(), P1), (B.into(), P1)].into_iter().collect();
        untagged(nd_at_risk(
            &f,
            |ip| *ip == SERVER6,
            |ip, vlan| {
                [(A6, A), (C6, C)]
                    .iter()
                    .find(|(i, _)| i == ip)
                    .map(|x| ClientKey::new(x.1, vlan))
            },
            |m| moved.get(m).copied(),
            moved.keys().copied(),
        ))
    }

    fn nd(
        outgoing: bool,
        kind: NdKind,
        eth_src: Mac,
        eth_dst: Mac,
        target: Ipv6Addr,
        lladdr: Option<Mac>,
    ) -> NdSeen {
        NdSeen {
            outgoing,
            kind,
            eth_src,
            eth_dst,
            target,
            lladdr,
            src_ip: Ipv6Addr::UNSPECIFIED,
            dst_ip: Ipv6Addr::UNSPECIFIED,
            vlan: 0,
        }
    }

    #[test]
    fn host_na_with_another_ports_mac_risks_that_client() {
        let f = nd(true, NdKind::Na, P0, A, SERVER6, Some(P0));
        assert_eq!(check6(f), vec![(A, Risk::HostAdvertised)]);
        // Without the option the Ethernet source counts.
        let f = nd(true, NdKind::Na, P0, A, SERVER6, None);
        assert_eq!(check6(f), vec![(A, Risk::HostAdvertised)]);
        // The option wins over the Ethernet source: P1's MAC sent out of P0 is harmless.
        assert!(check6(nd(true, NdKind::Na, P0, A, SERVER6, Some(P1))).is_empty());
    }

    #[test]
    fn an_na_that_carries_the_assigned_mac_is_harmless() {
        // rlbd's own NA, or the right port answering.
        assert!(check6(nd(true, NdKind::Na, P1, A, SERVER6, Some(P1))).is_empty());
        // Not for a client rlbd moved.
        assert!(check6(nd(true, NdKind::Na, P0, C, SERVER6, Some(P0))).is_empty());
    }

    #[test]
    fn an_na_for_an_address_not_ours_is_not_its_business() {
        assert!(check6(nd(true, NdKind::Na, P0, A, OTHER6, Some(P0))).is_empty());
        assert!(check6(nd(true, NdKind::Na, P0, ALL_NODES, OTHER6, Some(P0))).is_empty());
    }

    #[test]
    fn a_multicast_na_from_the_host_risks_every_moved_client_elsewhere() {
        assert_eq!(
            check6(nd(true, NdKind::Na, P0, ALL_NODES, SERVER6, Some(P0))),
            vec![(A, Risk::HostAdvertisedAll), (B, Risk::HostAdvertisedAll)]
        );
        assert!(check6(nd(true, NdKind::Na, P1, ALL_NODES, SERVER6, Some(P1))).is_empty());
    }

    #[test]
    fn a_host_ns_from_another_port_risks_the_client_it_goes_to() {
        // Unicast (a reachability probe).
        assert_eq!(
            check6(nd(true, NdKind::Ns, P0, B, A6, Some(P0))),
            vec![(B, Risk::HostSolicited)]
        );
        // Multicast to A's solicited-node group: resolved to A by its target.
        assert_eq!(
            check6(nd(true, NdKind::Ns, P0, SOLICITED_A, A6, Some(P0))),
            vec![(A, Risk::HostSolicited)]
        );
        // From the assigned port, or for a client rlbd did not move: harmless.
        assert!(check6(nd(true, NdKind::Ns, P1, A, A6, Some(P1))).is_empty());
        assert!(check6(nd(true, NdKind::Ns, P0, SOLICITED_A, C6, Some(P0))).is_empty());
        assert!(check6(nd(true, NdKind::Ns, P0, C, C6, None)).is_empty());
    }

    #[test]
    fn a_moved_client_soliciting_the_server_is_about_to_be_answered() {
        assert_eq!(
            check6(nd(false, NdKind::Ns, A, SOLICITED_A, SERVER6, Some(A))),
            vec![(A, Risk::ClientSolicited)]
        );
        assert_eq!(
            check6(nd(false, NdKind::Ns, A, P0, SERVER6, None)),
            vec![(A, Risk::ClientSolicited)],
            "a unicast probe too"
        );
        // Another client, or a target that is not the server's: nothing to do.
        assert!(check6(nd(false, NdKind::Ns, C, SOLICITED_A, SERVER6, Some(C))).is_empty());
        assert!(check6(nd(false, NdKind::Ns, A, SOLICITED_A, OTHER6, Some(A))).is_empty());
    }

    #[test]
    fn incoming_advertisements_risk_nobody() {
        assert!(check6(nd(false, NdKind::Na, A, P0, A6, Some(A))).is_empty());
        assert!(check6(nd(false, NdKind::Na, P0, A, SERVER6, Some(P0))).is_empty());
    }
}
