//! Counting in the kernel on a capture socket's port: where the program goes (the port's tc
//! ingress hook first, the socket's own filter second), and reading its counts.

use std::io;
use std::os::fd::AsFd;
use std::time::Instant;

use super::super::ebpf::{Delta, Hook, KernelCounter};
use super::super::filter;
use super::super::frame::Mac;
use super::super::setup::{attach_filter, bind_proto, with_ctx, ETH_P_NONE};
use super::{CaptureSocket, Weights};
use crate::engine::CountingHook;

impl CaptureSocket {
    /// Counts IPv4/IPv6 frames in the kernel from now on, with a map of `max_entries` (client,
    /// destination) pairs, counting the frames that came in for this port or for one of
    /// `host_macs` (the server's other MACs). Where the port's tc ingress hook takes the
    /// program ([`count_at_tc`](Self::count_at_tc)) no tap sees those frames at all; else the
    /// program replaces the socket's classic filter ([`count_on_socket`](Self::count_on_socket))
    /// and drops them before any copy. Either way ARP and Neighbor Discovery still reach the
    /// ring. On error (no CAP_BPF, an old kernel, the verifier refuses) nothing changes;
    /// [`kernel_hook_fallback`](Self::kernel_hook_fallback) says why the tc hook was not used.
    pub fn count_in_kernel(&mut self, host_macs: &[Mac], max_entries: u32) -> io::Result<()> {
        match self.count_at_tc(host_macs, max_entries) {
            Ok(()) => Ok(()),
            Err(e) => {
                let r = self.count_on_socket(host_macs, max_entries);
                self.tc_error = Some(e.to_string());
                r
            }
        }
    }

    /// Counts at the port's tc hooks (needs CAP_NET_ADMIN too; Linux >= 5.8 for the ring
    /// buffer); ARP and Neighbor Discovery then come from the programs' ring buffer, and the
    /// socket stops being a tap: it drops everything and is bound to a protocol that never
    /// arrives (it only sends).
    pub fn count_at_tc(&mut self, host_macs: &[Mac], max_entries: u32) -> io::Result<()> {
        let ctx = |e: io::Error| with_ctx(&self.name, self.ifindex, "eBPF counting at tc", e);
        let hook = Hook::tc(self.snap_len);
        let mut c = KernelCounter::new(host_macs, hook, max_entries, &self.name).map_err(ctx)?;
        c.attach_tc(&self.name, self.ifindex, self.tc_links)
            .map_err(ctx)?;
        // Until the socket is off the tap, a frame can count both at tc and in the ring (for
        // microseconds, once), and ARP can come twice.
        let ifindex = self.ifindex as libc::c_int;
        attach_filter(&self.fd, &filter::drop_all())
            .and_then(|()| bind_proto(&self.fd, ifindex, ETH_P_NONE))
            .map_err(|e| with_ctx(&self.name, self.ifindex, "leaving the tap", e))?;
        self.weights.set(Weights::EXACT);
        self.counter = Some(c);
        self.tc_error = None;
        // Twice the retire timeout: the block being filled at the switch is handed over by then.
        self.ring_free_at = Some(Instant::now() + 2 * self.retire);
        Ok(())
    }

    /// Whether [`count_at_tc`](Self::count_at_tc) attaches tcx links where the kernel has them
    /// (the default), or `cls_bpf` filters anyway (to test and measure that path on a kernel
    /// that has both).
    pub fn set_tc_links(&mut self, on: bool) {
        self.tc_links = on;
    }

    /// Counts with the program in place of the socket's classic filter.
    pub fn count_on_socket(&mut self, host_macs: &[Mac], max_entries: u32) -> io::Result<()> {
        let hook = Hook::socket(self.snap_len);
        let c = KernelCounter::new(host_macs, hook, max_entries, &self.name);
        self.count_with(c)
    }

    /// [`count_on_socket`](Self::count_on_socket) with the LRU hash even where the slot table
    /// would work (the fallback, tested on kernels that have both).
    #[cfg(test)]
    pub(crate) fn count_in_kernel_hash(
        &mut self,
        host_macs: &[Mac],
        max_entries: u32,
    ) -> io::Result<()> {
        let hook = Hook::socket(self.snap_len);
        let c = KernelCounter::with_hash(host_macs, hook, max_entries, &self.name);
        self.count_with(c)
    }

    fn count_with(&mut self, c: io::Result<KernelCounter>) -> io::Result<()> {
        let ctx = |e: io::Error| with_ctx(&self.name, self.ifindex, "eBPF counting", e);
        let c = c.map_err(ctx)?;
        c.attach(self.fd.as_fd()).map_err(ctx)?;
        self.weights.set(Weights::EXACT);
        self.counter = Some(c);
        Ok(())
    }

    /// The counting program's (run time in ns, runs), counted while the
    /// `kernel.bpf_stats_enabled` sysctl is 1 (for measurements).
    pub fn kernel_run_stats(&self) -> Option<(u64, u64)> {
        self.counter.as_ref()?.run_stats().ok()
    }

    /// Counting in the kernel: the packets the counting program has seen (at the tc hook, after
    /// GRO), from which the sampling ratio is chosen.
    pub fn hook_packets(&self) -> Option<u64> {
        self.counter.as_ref()?.hook_packets()
    }

    /// Where the kernel counts ("slots" or "hash"), while it does.
    pub fn kernel_store(&self) -> Option<&'static str> {
        self.counter.as_ref().map(|c| c.store_name())
    }

    /// Where the counting program runs ("tc" or "socket"), while it does.
    pub fn kernel_hook(&self) -> Option<&'static str> {
        self.counter.as_ref().map(|c| c.hook_name())
    }

    /// At the tc hooks: attached as "tcx" links or "cls_bpf" filters.
    pub fn kernel_tc_attach(&self) -> Option<&'static str> {
        self.counter.as_ref().and_then(|c| c.tc_attach())
    }

    /// Why the kernel counts in the hash and not the slot table, if it does.
    pub fn kernel_store_fallback(&self) -> Option<&str> {
        self.counter.as_ref().and_then(|c| c.slot_error())
    }

    /// Why the program is on the socket and not at the tc hook, if it is.
    pub fn kernel_hook_fallback(&self) -> Option<&str> {
        self.counter.as_ref().and(self.tc_error.as_deref())
    }

    /// True while IPv4/IPv6 frames are counted in the kernel.
    pub fn counts_in_kernel(&self) -> bool {
        self.counter.is_some()
    }

    /// While counting in the kernel: a new set of the server's other MACs (the program is
    /// loaded again and swapped in; the counts stay).
    pub fn set_count_macs(&mut self, host_macs: &[Mac]) -> io::Result<()> {
        let (name, ifindex) = (self.name.clone(), self.ifindex);
        let Some(c) = self.counter.as_mut() else {
            return Ok(());
        };
        let ctx = |e: io::Error| with_ctx(&name, ifindex, "eBPF counting", e);
        c.reprogram(host_macs, &name).map_err(ctx)?;
        if c.hook().at == CountingHook::Socket {
            c.attach(self.fd.as_fd()).map_err(ctx)?;
        }
        Ok(())
    }

    /// While counting in the kernel: the counts since the last call, per (client,
    /// destination), into `out` (cleared first; empty when not counting in the kernel), and the
    /// frames counted under no client (the map was full). On error `out` still holds what was
    /// read.
    pub fn read_counts(&mut self, out: &mut Vec<Delta>) -> io::Result<u64> {
        out.clear();
        // Every second: the ring goes back even on a port where `drain` has nothing to do.
        self.release_drained_ring();
        let (name, ifindex) = (&self.name, self.ifindex);
        match self.counter.as_mut() {
            Some(c) => c
                .read(out)
                .map_err(|e| with_ctx(name, ifindex, "reading the counting map", e)),
            None => Ok(0),
        }
    }
}
