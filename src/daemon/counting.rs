//! The counting input: each port's capture socket drained in bounded batches, its IPv4/IPv6
//! frames handed to the engine with what the kernel said of them (whether they are the
//! server's load is the engine's to say), its ARP and Neighbor Discovery frames as seen; and,
//! once a second, what the ports counted in the kernel and what their rings dropped.

use std::collections::VecDeque;

use crate::capture::ebpf::Delta;
use crate::capture::frame::tag_in_frame;
use crate::capture::{parse, Frame, PACKET_HOST};
use crate::client::ClientKey;
use crate::engine::{Engine, Input, PortId, PortSecond};

use super::captures::Captures;

/// Frames handled per capture socket per wakeup.
const CAPTURE_BATCH: usize = 4096;

/// The buffers the counting input reuses (no allocation per frame or per wakeup).
#[derive(Default)]
pub struct CountingInput {
    /// ARP and ND frames of one batch, handed over after it.
    frames: VecDeque<(Frame, bool, u16)>,
    /// What the ports counted in the kernel in one second.
    counts: Vec<(PortId, Delta)>,
    buf: Vec<Delta>,
    /// Each port's capture facts this second.
    facts: Vec<PortSecond>,
}

impl CountingInput {
    /// Drains port `i`'s socket (one batch) into the engine.
    pub fn drain(&mut self, now: u64, i: usize, captures: &mut Captures, engine: &mut Engine) {
        let port = PortId::new(i);
        let frames = &mut self.frames;
        let Some(cap) = captures.socket(i) else {
            captures.ready[i] = false;
            return;
        };
        let n = cap.drain(CAPTURE_BATCH, |meta, bytes| {
            let vlan = meta.vlan.unwrap_or_else(|| tag_in_frame(bytes));
            if vlan == u16::MAX {
                return;
            }
            let (src_mac, dst_mac, src, dst) = match parse(bytes) {
                Some(Frame::Ipv4 {
                    src_mac,
                    dst_mac,
                    src_ip,
                    dst_ip,
                }) => (src_mac, dst_mac, src_ip.into(), dst_ip.into()),
                Some(Frame::Ipv6 {
                    src_mac,
                    dst_mac,
                    src_ip,
                    dst_ip,
                }) => (src_mac, dst_mac, src_ip.into(), dst_ip.into()),
                Some(f @ (Frame::Arp { .. } | Frame::Nd { .. })) => {
                    // Rare; a flood of them is bounded by the batch.
                    frames.push_back((f, meta.is_outgoing(), vlan));
                    return;
                }
                _ => return,
            };
            let input = Input::Counted {
                port,
                key: ClientKey::new(src_mac, vlan),
                src,
                dst,
                bytes: meta.bytes(),
                for_host: meta.pkt_type == PACKET_HOST,
                dst_mac,
            };
            engine.handle(now, input);
        });
        let more = n >= CAPTURE_BATCH || cap.pending();
        captures.ready[i] = more;
        engine.handle(now, Input::Drained { port, frames: n });
    }

    /// The next ARP or ND frame of the last batch, in the order seen.
    pub fn next_frame(&mut self) -> Option<(Frame, bool, u16)> {
        self.frames.pop_front()
    }

    /// The second that ends: what the ports counted in the kernel, how their maps read, what
    /// their rings dropped, the packets their programs saw.
    pub fn second(&mut self, now: u64, captures: &mut Captures, engine: &mut Engine) {
        captures.second(&mut self.counts, &mut self.buf, &mut self.facts);
        let input = Input::Second {
            counts: &self.counts,
            ports: &self.facts,
        };
        engine.handle(now, input);
    }
}
