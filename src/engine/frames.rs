//! ARP and Neighbor Discovery frames seen on a port, as the steering core wants them, and the
//! claims of the server's addresses by other hosts among them.

use crate::capture::Frame;
use crate::host::HostView;
use crate::policy::reassert::{ArpSeen, NdSeen};
use crate::steer::foreign::{arp_claim, nd_claim, ForeignClaims};

/// A frame the steering core looks at.
pub enum Seen {
    Arp(ArpSeen),
    Nd(NdSeen),
}

/// The steering core's view of an ARP or ND frame (`None` for any other).
pub fn seen(frame: &Frame, outgoing: bool, vlan: u16) -> Option<Seen> {
    match *frame {
        Frame::Arp {
            eth_src,
            eth_dst,
            op,
            sha,
            spa,
            tpa,
            ..
        } => Some(Seen::Arp(ArpSeen {
            outgoing,
            op,
            eth_src,
            eth_dst,
            sha,
            spa,
            tpa,
            vlan,
        })),
        Frame::Nd {
            eth_src,
            eth_dst,
            kind,
            target,
            src_ip,
            dst_ip,
            lladdr,
            ..
        } => Some(Seen::Nd(NdSeen {
            outgoing,
            kind,
            eth_src,
            eth_dst,
            target,
            lladdr,
            src_ip,
            dst_ip,
            vlan,
        })),
        _ => None,
    }
}

/// The warning, once per episode, about a frame in which another host claims one of the
/// server's addresses.
pub fn foreign_claim(
    host: &HostView,
    claims: &mut ForeignClaims,
    now: u64,
    f: &Frame,
    outgoing: bool,
) -> Option<String> {
    let ours = |ip| host.is_ours(ip);
    let our_mac = |m| host.links().values().any(|l| l.mac == Some(m));
    let (ip, mac) = match f {
        Frame::Arp { sha, spa, .. } => arp_claim(outgoing, *sha, *spa, ours, our_mac),
        Frame::Nd {
            kind,
            target,
            lladdr,
            eth_src,
            ..
        } => nd_claim(outgoing, *kind, *target, *lladdr, *eth_src, ours, our_mac),
        _ => None,
    }?;
    claims.seen(now, ip, mac).then(|| {
        format!(
            "another host ({mac}) claims the server's address {ip}: clients that hear it send \
             to that host instead (a duplicate address, or an attack); rlbd does not answer it"
        )
    })
}
