//! Which moved clients an ARP frame on the wire puts at risk. Pure: the daemon hands in the frame
//! and where each moved client should be, and re-asserts whatever comes back.

use super::arp::Mac;

const BROADCAST: Mac = [0xff; 6];
const ARP_REQUEST: u16 = 1;
const ARP_REPLY: u16 = 2;

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
}

impl Risk {
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::HostReplied => "the host answered its ARP",
            Risk::HostBroadcast => "the host broadcast an ARP request",
            Risk::HostAsked => "the host sent it an ARP request",
            Risk::ClientAsked => "it asked for the server's address",
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
}

/// The clients to re-assert. `assigned(client)` is the MAC of the port rlbd put the client on,
/// `None` for a client it did not move; `moved` lists every moved client (used for broadcasts).
/// A frame that already carries the assigned MAC (rlbd's own update, the right port's answer)
/// puts nobody at risk.
pub fn at_risk(
    f: &ArpSeen,
    assigned: impl Fn(&Mac) -> Option<Mac>,
    moved: impl Iterator<Item = Mac>,
) -> Vec<(Mac, Risk)> {
    let wrong = |client: &Mac| assigned(client).is_some_and(|want| want != f.sha);
    match (f.outgoing, f.op) {
        (true, ARP_REPLY) if wrong(&f.eth_dst) => vec![(f.eth_dst, Risk::HostReplied)],
        (true, ARP_REQUEST) if f.eth_dst == BROADCAST => moved
            .filter(|m| wrong(m))
            .map(|m| (m, Risk::HostBroadcast))
            .collect(),
        (true, ARP_REQUEST) if wrong(&f.eth_dst) => vec![(f.eth_dst, Risk::HostAsked)],
        (false, ARP_REQUEST) if assigned(&f.eth_src).is_some() => {
            vec![(f.eth_src, Risk::ClientAsked)]
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const P0: Mac = [2, 0, 0, 0, 1, 0];
    const P1: Mac = [2, 0, 0, 0, 1, 1];
    const A: Mac = [2, 0, 0, 0, 0, 0xa];
    const B: Mac = [2, 0, 0, 0, 0, 0xb];
    const C: Mac = [2, 0, 0, 0, 0, 0xc];

    /// A and B were moved to P1; C was never moved.
    fn check(f: ArpSeen) -> Vec<(Mac, Risk)> {
        let moved: HashMap<Mac, Mac> = [(A, P1), (B, P1)].into_iter().collect();
        let mut v = at_risk(&f, |m| moved.get(m).copied(), moved.keys().copied());
        v.sort();
        v
    }

    fn frame(outgoing: bool, op: u16, eth_src: Mac, eth_dst: Mac, sha: Mac) -> ArpSeen {
        ArpSeen {
            outgoing,
            op,
            eth_src,
            eth_dst,
            sha,
        }
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
}
