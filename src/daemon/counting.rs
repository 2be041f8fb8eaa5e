//! The counting input: each port's capture socket drained in bounded batches, its IPv4/IPv6
//! frames handed to the engine as counted, its ARP and Neighbor Discovery frames as seen; and,
//! once a second, what the ports counted in the kernel.

use std::collections::VecDeque;

use crate::capture::ebpf::Delta;
use crate::capture::frame::tag_in_frame;
use crate::capture::{parse, Frame, PACKET_HOST};
use crate::client::ClientKey;
use crate::engine::{Engine, Input, PortSampling};

use super::captures::Captures;

/// Frames handled per capture socket per wakeup.
const CAPTURE_BATCH: usize = 4096;

/// The buffers the counting input reuses (no allocation per frame or per wakeup).
#[derive(Default)]
pub struct CountingInput {
    /// ARP and ND frames of one batch, handed over after it.
    frames: VecDeque<(Frame, bool, u16)>,
    /// What the ports counted in the kernel in one second.
    counts: Vec<(usize, Delta)>,
    buf: Vec<Delta>,
    /// Each port's sampling this second.
    sampling: Vec<PortSampling>,
}

impl CountingInput {
    /// Drains port `i`'s socket (one batch) into the engine.
    pub fn drain(&mut self, now: u64, i: usize, captures: &mut Captures, engine: &mut Engine) {
        let port = i as u16;
        let frames = &mut self.frames;
        // Frames to a macvlan's (or a bridge's own) MAC reach the port as another host's; they
        // are the server's all the same. A frame for another port's MAC flooded here
        // (promiscuous port, a switch that forgot a MAC) is not this port's load.
        let Some((cap, host_macs)) = captures.socket_and_host_macs(i) else {
            captures.ready[i] = false;
            return;
        };
        let n = cap.drain(CAPTURE_BATCH, |meta, bytes| {
            let vlan = meta.vlan.unwrap_or_else(|| tag_in_frame(bytes));
            if vlan == u16::MAX {
                return;
            }
            let host = |dst: &crate::Mac| meta.pkt_type == PACKET_HOST || host_macs.contains(dst);
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
            if host(&dst_mac) {
                let key = ClientKey::new(src_mac, vlan);
                let bytes = meta.bytes();
                let input = Input::Counted {
                    port,
                    key,
                    src,
                    dst,
                    bytes,
                };
                engine.handle(now, input);
            }
        });
        let more = n >= CAPTURE_BATCH || cap.pending();
        captures.ready[i] = more;
        captures.sample_from_drained(engine.ports(), i, now, n);
    }

    /// The next ARP or ND frame of the last batch, in the order seen.
    pub fn next_frame(&mut self) -> Option<(Frame, bool, u16)> {
        self.frames.pop_front()
    }

    /// The second that ends: what the ports counted in the kernel, whether every map was read
    /// whole, whether a ring that counts dropped frames.
    pub fn second(&mut self, now: u64, captures: &mut Captures, engine: &mut Engine) {
        let whole = captures.read_counts(engine.ports(), &mut self.counts, &mut self.buf);
        let ring_drops = captures.update_drops(engine.ports());
        captures.sample_from_hooks(engine.ports(), now, &mut self.sampling);
        engine.handle(
            now,
            Input::Second {
                counts: &self.counts,
                whole,
                ring_drops,
                sampling: &self.sampling,
            },
        );
    }
}
