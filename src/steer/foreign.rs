//! Another host claiming one of the server's addresses: an ARP frame from outside with the
//! server's address as its sender (a reply, or a gratuitous ARP), or a Neighbor Advertisement
//! from outside for one of the server's IPv6 addresses. Clients that hear one send to the
//! claimant instead of the server: a duplicate address, a misconfigured host, or an attack.
//!
//! rlbd does not fight it on the wire (answering every claim would be a storm between two
//! hosts); it tells the operator, once per episode: a claimant (MAC, address) that has been
//! quiet for [`EPISODE_GAP_MS`] starts a new episode when it claims again.
//!
//! Pure: the shell hands in what it captured, what is the server's, and the time.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::capture::NdKind;
use crate::Mac;

/// Quiet time after which a claimant's next claim is a new episode (and a new warning).
pub const EPISODE_GAP_MS: u64 = 60_000;
/// Claimants remembered at once; a flood of made-up MACs cannot grow the map past this.
pub const MAX_CLAIMANTS: usize = 256;

/// An incoming ARP frame's sender: a claim when the address is the server's and the MAC is not.
pub fn arp_claim(
    outgoing: bool,
    sha: Mac,
    spa: Ipv4Addr,
    is_ours: impl Fn(IpAddr) -> bool,
    is_our_mac: impl Fn(Mac) -> bool,
) -> Option<(IpAddr, Mac)> {
    let ip = IpAddr::from(spa);
    (!outgoing && !spa.is_unspecified() && is_ours(ip) && !is_our_mac(sha)).then_some((ip, sha))
}

/// An incoming Neighbor Advertisement for one of the server's addresses, with a link-layer
/// address (else the Ethernet source) that is not the server's.
pub fn nd_claim(
    outgoing: bool,
    kind: NdKind,
    target: Ipv6Addr,
    lladdr: Option<Mac>,
    eth_src: Mac,
    is_ours: impl Fn(IpAddr) -> bool,
    is_our_mac: impl Fn(Mac) -> bool,
) -> Option<(IpAddr, Mac)> {
    let ip = IpAddr::from(target);
    let mac = lladdr.unwrap_or(eth_src);
    (!outgoing && kind == NdKind::Na && is_ours(ip) && !is_our_mac(mac)).then_some((ip, mac))
}

/// The episodes seen so far.
#[derive(Debug, Default)]
pub struct ForeignClaims {
    /// (address, claimant) -> when it last claimed, ms.
    last: HashMap<(IpAddr, Mac), u64>,
    episodes: u64,
}

impl ForeignClaims {
    /// Records one claim at `now_ms`; true when it starts an episode (warn then, only then).
    pub fn seen(&mut self, now_ms: u64, ip: IpAddr, mac: Mac) -> bool {
        let fresh = match self.last.get(&(ip, mac)) {
            Some(&at) => now_ms.saturating_sub(at) >= EPISODE_GAP_MS,
            None => true,
        };
        if fresh && !self.last.contains_key(&(ip, mac)) && self.last.len() >= MAX_CLAIMANTS {
            self.last
                .retain(|_, at| now_ms.saturating_sub(*at) < EPISODE_GAP_MS);
            if self.last.len() >= MAX_CLAIMANTS {
                // Still full of active claimants: a flood. Count it, do not grow.
                self.episodes += 1;
                return false;
            }
        }
        self.last.insert((ip, mac), now_ms);
        if fresh {
            self.episodes += 1;
        }
        fresh
    }

    /// Episodes since start.
    pub fn episodes(&self) -> u64 {
        self.episodes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const PORT: Mac = Mac(2, 0, 0xc6, 0x12, 1, 0);
    const EVIL: Mac = Mac(2, 0, 0xee, 0, 0, 1);

    fn ours(ip: IpAddr) -> bool {
        ip == IpAddr::from(OURS) || ip == "2001:db8:77::1".parse::<IpAddr>().unwrap()
    }
    fn our_mac(m: Mac) -> bool {
        m == PORT
    }

    #[test]
    fn only_incoming_frames_with_our_address_and_a_foreign_mac_are_claims() {
        assert_eq!(
            arp_claim(false, EVIL, OURS, ours, our_mac),
            Some((OURS.into(), EVIL))
        );
        assert_eq!(arp_claim(true, EVIL, OURS, ours, our_mac), None);
        assert_eq!(arp_claim(false, PORT, OURS, ours, our_mac), None);
        let client = Ipv4Addr::new(198, 18, 0, 11);
        assert_eq!(arp_claim(false, EVIL, client, ours, our_mac), None);
        assert_eq!(
            arp_claim(false, EVIL, Ipv4Addr::UNSPECIFIED, |_| true, our_mac),
            None,
            "an ARP probe claims nothing"
        );
        let v6: Ipv6Addr = "2001:db8:77::1".parse().unwrap();
        assert_eq!(
            nd_claim(false, NdKind::Na, v6, Some(EVIL), PORT, ours, our_mac),
            Some((v6.into(), EVIL))
        );
        assert_eq!(
            nd_claim(false, NdKind::Na, v6, None, EVIL, ours, our_mac),
            Some((v6.into(), EVIL))
        );
        assert_eq!(
            nd_claim(false, NdKind::Ns, v6, Some(EVIL), EVIL, ours, our_mac),
            None,
            "a solicitation asks, it does not claim"
        );
        assert_eq!(
            nd_claim(false, NdKind::Na, v6, Some(PORT), EVIL, ours, our_mac),
            None
        );
    }

    #[test]
    fn one_warning_per_episode() {
        let mut f = ForeignClaims::default();
        let ip = IpAddr::from(OURS);
        assert!(f.seen(0, ip, EVIL));
        for t in (100..30_000).step_by(100) {
            assert!(!f.seen(t, ip, EVIL), "storm at {t} ms is the same episode");
        }
        assert!(!f.seen(29_900 + EPISODE_GAP_MS - 1, ip, EVIL));
        assert!(
            f.seen(30_000 + 2 * EPISODE_GAP_MS, ip, EVIL),
            "after a quiet gap"
        );
        assert!(
            f.seen(30_000 + 2 * EPISODE_GAP_MS, ip, PORT),
            "another claimant"
        );
        assert_eq!(f.episodes(), 3);
    }

    #[test]
    fn a_flood_of_claimants_stays_bounded() {
        let mut f = ForeignClaims::default();
        let ip = IpAddr::from(OURS);
        for i in 0..10_000u32 {
            let b = i.to_be_bytes();
            f.seen(u64::from(i), ip, Mac(2, 1, b[0], b[1], b[2], b[3]));
        }
        assert!(f.last.len() <= MAX_CLAIMANTS);
        assert_eq!(f.episodes(), 10_000);
    }
}
