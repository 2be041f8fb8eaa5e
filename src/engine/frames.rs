//! ARP and Neighbor Discovery frames seen on a port: a claim of the server's address by another
//! host is warned about once per episode; a frame that puts a moved client at risk is answered
//! with a re-assertion; the host's own answers are noted (plain ports' failover).

use log::Level;

use super::{Engine, Topic};
use crate::capture::Frame;
use crate::steer::foreign::{arp_claim, nd_claim};
use crate::steer::{ArpSeen, NdSeen};

impl Engine {
    pub(super) fn on_frame(&mut self, now: u64, frame: &Frame, outgoing: bool, vlan: u16) {
        self.note_claim(now, frame, outgoing);
        let moved_before = self.steer.counters().reasserts;
        match *frame {
            Frame::Arp {
                eth_src,
                eth_dst,
                op,
                sha,
                spa,
                tpa,
                ..
            } => {
                let seen = ArpSeen {
                    outgoing,
                    op,
                    eth_src,
                    eth_dst,
                    sha,
                    spa,
                    tpa,
                    vlan,
                };
                self.steer_with(now, |s, now, ctx, out| s.on_arp(now, &seen, ctx, out));
            }
            Frame::Nd {
                eth_src,
                eth_dst,
                kind,
                target,
                src_ip,
                dst_ip,
                lladdr,
                ..
            } => {
                let seen = NdSeen {
                    outgoing,
                    kind,
                    eth_src,
                    eth_dst,
                    target,
                    lladdr,
                    src_ip,
                    dst_ip,
                    vlan,
                };
                self.steer_with(now, |s, now, ctx, out| s.on_nd(now, &seen, ctx, out));
            }
            _ => {}
        }
        // The record of whom the host answered where is durable state too.
        self.dirty |= outgoing || self.steer.counters().reasserts != moved_before;
    }

    /// Warns, once per episode, about a frame in which another host claims one of the server's
    /// addresses.
    fn note_claim(&mut self, now: u64, f: &Frame, outgoing: bool) {
        let host = &self.host;
        let ours = |ip| host.is_ours(ip);
        let our_mac = |m| host.links().values().any(|l| l.mac == Some(m));
        let claim = match f {
            Frame::Arp { sha, spa, .. } => arp_claim(outgoing, *sha, *spa, ours, our_mac),
            Frame::Nd {
                kind,
                target,
                lladdr,
                eth_src,
                ..
            } => nd_claim(outgoing, *kind, *target, *lladdr, *eth_src, ours, our_mac),
            _ => None,
        };
        if let Some((ip, mac)) = claim {
            if self.trouble.foreign.seen(now, ip, mac) {
                self.log(
                    Level::Warn,
                    Topic::ForeignClaim,
                    format!(
                        "another host ({mac}) claims the server's address {ip}: clients that hear \
                         it send to that host instead (a duplicate address, or an attack); rlbd \
                         does not answer it"
                    ),
                );
            }
        }
    }
}
