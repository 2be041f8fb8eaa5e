//! The capture sockets, one per port, indexed like the port table: opened when a port appears,
//! closed when it goes, re-filtered when the set of port MACs changes, and used to send the
//! steering core's frames out of the right port. Where the kernel allows, each socket counts
//! IPv4/IPv6 frames in the kernel (eBPF, read once a second); otherwise its sampling ratio
//! follows its port's packet rate (a `Sampler` per port).

use std::io;

use log::{debug, error, info, warn};
use mio::{Interest, Registry, Token};

use crate::capture::ebpf::Delta;
use crate::capture::sampling::Sampler;
use crate::capture::{CaptureSocket, RingConfig};
use crate::config::KernelCounting;
use crate::engine::{CaptureFacts, PortSampling};
use crate::host::PortTable;
use crate::status::Counting;

pub struct Captures {
    socks: Vec<Option<CaptureSocket>>,
    /// Frames may be waiting on this socket (edge-triggered readiness, bounded batches).
    pub ready: Vec<bool>,
    ring: RingConfig,
    base: usize,
    /// Each port's sampling policy, and the limit new ones get (`None`: sampling off).
    samplers: Vec<Sampler>,
    sampling_limit: Option<u32>,
    /// MACs of the server's interfaces stacked on the bond that are not a port's (a macvlan's,
    /// a bridge's own): frames to them are the server's load too.
    host_macs: Vec<crate::Mac>,
    /// Whether ports count in the kernel, and the size of each port's counting map.
    kernel: KernelCounting,
    map_entries: u32,
    /// Ports already told why they cannot count in the kernel (said once per port name).
    told: Vec<String>,
    /// Ports whose counting map is full (told once per episode).
    full: Vec<bool>,
    /// Frames each port's counting map gave to no client, since its socket opened.
    uncounted: Vec<u64>,
    /// Each ring's drop counter as last read.
    drops_seen: Vec<u64>,
}

impl Captures {
    /// `base`: the mio token of port 0's socket; port `i` uses `base + i`.
    /// `sampling_limit`: `[capture]` frames a second a port hands over before it is sampled
    /// (`None`: never). `kernel`: whether to count in the kernel; `map_entries`: the size of
    /// each port's counting map.
    pub fn new(
        ring: RingConfig,
        base: usize,
        sampling_limit: Option<u32>,
        kernel: KernelCounting,
        map_entries: u32,
    ) -> Self {
        Captures {
            socks: Vec::new(),
            ready: Vec::new(),
            ring,
            base,
            samplers: Vec::new(),
            sampling_limit,
            host_macs: Vec::new(),
            kernel,
            map_entries,
            told: Vec::new(),
            full: Vec::new(),
            uncounted: Vec::new(),
            drops_seen: Vec::new(),
        }
    }

    /// The MACs every filter passes: the ports' and the host interfaces'.
    fn macs(&self, ports: &PortTable) -> Vec<crate::Mac> {
        let mut macs = ports.macs();
        for m in &self.host_macs {
            if !macs.contains(m) {
                macs.push(*m);
            }
        }
        if macs.len() > crate::capture::filter::MAX_MACS {
            warn!(
                "{} MACs to capture for, more than a filter holds ({}): frames to the last ones are not counted",
                macs.len(),
                crate::capture::filter::MAX_MACS
            );
            macs.truncate(crate::capture::filter::MAX_MACS);
        }
        macs
    }

    /// The host interfaces' own MACs that are no port's (a new set re-filters every socket).
    pub fn set_host_macs(&mut self, ports: &PortTable, macs: Vec<crate::Mac>) {
        let of_ports = ports.macs();
        let macs: Vec<crate::Mac> = macs.into_iter().filter(|m| !of_ports.contains(m)).collect();
        if macs != self.host_macs {
            self.host_macs = macs;
            self.refilter(ports);
            for (i, c) in self.socks.iter_mut().enumerate() {
                if let Some(c) = c.as_mut().filter(|c| c.counts_in_kernel()) {
                    if let Err(e) = c.set_count_macs(&self.host_macs) {
                        let name = ports.list.get(i).map_or("?", |p| p.name.as_str());
                        error!("port {name}: cannot update the counting program: {e}");
                    }
                }
            }
        }
    }

    /// Port `i`'s socket, and the host interfaces' MACs its frames may be for.
    pub fn socket_and_host_macs(
        &mut self,
        i: usize,
    ) -> Option<(&mut CaptureSocket, &[crate::Mac])> {
        let sock = self.socks.get_mut(i)?.as_mut()?;
        Some((sock, &self.host_macs))
    }

    fn grow(&mut self, n: usize) {
        if self.socks.len() < n {
            self.socks.resize_with(n, || None);
            self.ready.resize(n, false);
            let limit = self.sampling_limit;
            self.samplers.resize_with(n, || Sampler::new(limit));
            self.full.resize(n, false);
            self.uncounted.resize(n, 0);
        }
    }

    /// Feeds port `i`'s receive packet counter (read at `at_ms`) to its sampler and applies a
    /// new ratio to its socket. A port counting at its tc hooks is sampled from the packets
    /// the hook saw instead ([`Self::sample_from_hooks`]): under GRO far fewer.
    pub fn sample_from_counter(
        &mut self,
        ports: &PortTable,
        i: usize,
        at_ms: u64,
        rx_packets: u64,
    ) {
        if self.counts_in_kernel(i) {
            return;
        }
        let n = self
            .samplers
            .get_mut(i)
            .and_then(|s| s.on_counter(at_ms, rx_packets));
        self.apply_sampling(ports, i, n);
    }

    /// Tells port `i`'s sampler how many frames a drain handed over, so that a surge raises the
    /// ratio before the next counter reading.
    pub fn sample_from_drained(&mut self, ports: &PortTable, i: usize, at_ms: u64, frames: usize) {
        // Counting in the kernel, only ARP and ND are handed over: no measure of the data's rate.
        if self.counts_in_kernel(i) {
            return;
        }
        let n = self
            .samplers
            .get_mut(i)
            .and_then(|s| s.on_drained(at_ms, frames));
        self.apply_sampling(ports, i, n);
    }

    /// A new limit (reload): off means exact at once, otherwise the next readings decide.
    pub fn set_sampling_limit(&mut self, ports: &PortTable, limit: Option<u32>) {
        self.sampling_limit = limit;
        for i in 0..self.samplers.len() {
            let n = self.samplers[i].set_limit(limit);
            self.apply_sampling(ports, i, n);
        }
    }

    /// A new ratio for port `i`: its capture filter's, or its counting program's.
    fn apply_sampling(&self, ports: &PortTable, i: usize, one_in: Option<u32>) {
        let (Some(n), Some(c)) = (one_in, self.get(i)) else {
            return;
        };
        let name = ports.list.get(i).map_or("?", |p| p.name.as_str());
        let at = if c.counts_in_kernel() {
            " in the kernel"
        } else {
            ""
        };
        match c.set_sampling(n) {
            Ok(()) if n == 1 => info!("port {name}: counting every frame{at}"),
            Ok(()) => info!("port {name}: counting one frame in {n}{at}"),
            Err(e) => warn!("port {name}: sampling ratio not changed: {e}"),
        }
    }

    /// Once a second: each port's sampling into `out` (by index), the ports counting in the
    /// kernel first fed to their samplers the packets their program saw, and a new ratio applied.
    pub fn sample_from_hooks(
        &mut self,
        ports: &PortTable,
        at_ms: u64,
        out: &mut Vec<PortSampling>,
    ) {
        out.clear();
        for i in 0..ports.list.len() {
            let seen = self
                .get(i)
                .filter(|_| self.counts_in_kernel(i))
                .and_then(CaptureSocket::hook_packets);
            if let Some(pk) = seen {
                let n = self
                    .samplers
                    .get_mut(i)
                    .and_then(|s| s.on_counter(at_ms, pk));
                self.apply_sampling(ports, i, n);
            }
            out.push(PortSampling {
                one_in: self.sampling(i),
                hook_packets: seen,
            });
        }
    }

    /// Whether port `i` counts in the kernel (at its tc hooks or in a socket filter): its ratio
    /// is then chosen from the packets its program saw, not from the port's counter or the
    /// frames drained.
    fn counts_in_kernel(&self, i: usize) -> bool {
        self.hook(i).is_some()
    }

    /// Port `i`'s sampling ratio: one IPv4/IPv6 frame in this many is counted (1 without a
    /// socket).
    pub fn sampling(&self, i: usize) -> u32 {
        self.get(i).map_or(1, |c| c.sampling())
    }

    /// Where port `i`'s counting program runs ("tc" or "socket"), while it counts in the kernel.
    pub fn hook(&self, i: usize) -> Option<&'static str> {
        self.get(i).and_then(|c| c.kernel_hook())
    }

    /// How port `i` counts (exact without a socket).
    pub fn mode(&self, i: usize) -> Counting {
        match self.get(i) {
            Some(c) if c.counts_in_kernel() => Counting::Ebpf,
            Some(c) if c.sampling() > 1 => Counting::Sampled,
            _ => Counting::Exact,
        }
    }

    /// What the ports that count in the kernel counted since the last call: (port, counts)
    /// into `out` (cleared first). False when a map could not be read whole or was full (the
    /// rates of this second miss part of it).
    pub fn read_counts(
        &mut self,
        ports: &PortTable,
        out: &mut Vec<(usize, Delta)>,
        buf: &mut Vec<Delta>,
    ) -> bool {
        out.clear();
        let mut whole = true;
        for (i, c) in self.socks.iter_mut().enumerate() {
            let Some(c) = c.as_mut().filter(|c| c.counts_in_kernel()) else {
                continue;
            };
            let name = ports.list.get(i).map_or("?", |p| p.name.as_str());
            match c.read_counts(buf) {
                Err(e) => {
                    warn!("port {name}: {e}");
                    whole = false;
                }
                Ok(0) => {
                    if std::mem::take(&mut self.full[i]) {
                        info!("port {name}: the counting map has room again");
                    }
                }
                Ok(lost) => {
                    self.uncounted[i] = self.uncounted[i].saturating_add(lost);
                    if !std::mem::replace(&mut self.full[i], true) {
                        warn!(
                            "port {name}: the counting map is full ({lost} frames counted under \
                             no client this second; more clients than table_size allows?): \
                             no move is made on such seconds"
                        );
                    }
                    whole = false;
                }
            }
            out.extend(buf.drain(..).map(|d| (i, d)));
        }
        whole
    }

    pub fn get(&self, port: usize) -> Option<&CaptureSocket> {
        self.socks.get(port)?.as_ref()
    }

    /// The port whose socket `token` is.
    pub fn port_of(&self, token: Token) -> Option<usize> {
        token
            .0
            .checked_sub(self.base)
            .filter(|p| *p < self.socks.len())
    }

    /// Opens (and registers) the socket of port `i`, replacing any old one.
    pub fn open(&mut self, ports: &PortTable, i: usize, registry: &Registry) -> io::Result<()> {
        self.grow(ports.list.len());
        self.close(i, registry);
        // A new socket, a new map: its counts start again, like the ring's.
        self.uncounted[i] = 0;
        self.full[i] = false;
        let p = &ports.list[i];
        let mut c = CaptureSocket::open(&p.name, p.ifindex, &self.macs(ports), &self.ring)?;
        if self.kernel != KernelCounting::Off {
            match c.count_in_kernel(&self.host_macs, self.map_entries) {
                Ok(()) => {
                    info!(
                        "port {}: counting every frame in the kernel (eBPF, map: {}, hook: {}{})",
                        p.name,
                        c.kernel_store().unwrap_or("?"),
                        c.kernel_hook().unwrap_or("?"),
                        c.kernel_tc_attach()
                            .map_or(String::new(), |how| format!(", attached: {how}"))
                    );
                    if let Some(why) = c.kernel_hook_fallback() {
                        info!(
                            "port {}: not at the tc hooks ({why}): a filter on the capture socket \
                             instead, every frame through a packet tap",
                            p.name
                        );
                    }
                    if let Some(why) = c.kernel_store_fallback() {
                        info!(
                            "port {}: no slot table here ({why}): the hash instead",
                            p.name
                        );
                    }
                }
                Err(e) => self.cannot_count_in_kernel(&p.name, &e),
            }
        }
        if let Err(e) = registry.register(&mut c, Token(self.base + i), Interest::READABLE) {
            error!("port {}: cannot register capture socket: {e}", p.name);
        }
        self.socks[i] = Some(c);
        // A new socket counts exactly.
        self.samplers[i].reset();
        // Frames may already be waiting; edge-triggered readiness would not report them.
        self.ready[i] = true;
        Ok(())
    }

    /// Says once per port why it counts from captured frames instead.
    fn cannot_count_in_kernel(&mut self, name: &str, e: &io::Error) {
        if self.told.iter().any(|n| n == name) {
            return;
        }
        self.told.push(name.to_string());
        let then = if self.sampling_limit.is_some() {
            "counting from captured frames (sampled when busy)"
        } else {
            "counting every captured frame"
        };
        if self.kernel == KernelCounting::Require {
            error!("port {name}: cannot count in the kernel ({e}); {then}");
        } else {
            info!("port {name}: cannot count in the kernel ({e}); {then}");
        }
    }

    pub fn close(&mut self, i: usize, registry: &Registry) {
        self.grow(i + 1);
        if let Some(mut c) = self.socks[i].take() {
            let _ = registry.deregister(&mut c);
        }
        self.ready[i] = false;
    }

    /// Re-filters every socket for the present ports' (and host interfaces') MACs.
    pub fn refilter(&self, ports: &PortTable) {
        let macs = self.macs(ports);
        for (i, c) in self.socks.iter().enumerate() {
            if let Some(c) = c {
                if let Err(e) = c.set_macs(&macs) {
                    let name = ports.list.get(i).map_or("?", |p| p.name.as_str());
                    error!("port {name}: cannot update capture filter: {e}");
                }
            }
        }
    }

    /// Sends one frame out of `port`: `None` when the port has no socket, else what the kernel
    /// said (its errno kept, for the caller's retry decision).
    pub fn try_send(&self, port: usize, frame: &[u8]) -> Option<io::Result<()>> {
        Some(self.get(port)?.send(frame))
    }

    /// Reads each ring's drop counter; warns about new drops. True when some ring whose frames
    /// are counted dropped frames since the last call: where the kernel counts, the rings carry
    /// only ARP and ND, and an ARP storm that fills them leaves the rates whole (it must not
    /// stop every move).
    pub fn update_drops(&mut self, ports: &PortTable) -> bool {
        let mut dropped = false;
        self.drops_seen.resize(self.socks.len(), 0);
        for (i, (p, c)) in ports.list.iter().zip(&self.socks).enumerate() {
            let Some(c) = c.as_ref().filter(|_| p.present) else {
                continue;
            };
            match c.stats() {
                Ok(s) if s.drops > self.drops_seen[i] => {
                    warn!(
                        "port {}: capture ring dropped {} frames",
                        p.name,
                        s.drops - self.drops_seen[i]
                    );
                    self.drops_seen[i] = s.drops;
                    dropped |= !c.counts_in_kernel();
                }
                Ok(_) => {}
                Err(e) => debug!("port {}: cannot read ring statistics: {e}", p.name),
            }
        }
        dropped
    }

    /// Frames port `i`'s counting map gave to no client since its socket opened.
    pub fn uncounted(&self, i: usize) -> u64 {
        self.uncounted.get(i).copied().unwrap_or(0)
    }

    /// (frames delivered, frames dropped) by port `i`'s ring since it was opened.
    pub fn ring_counts(&self, i: usize) -> (u64, u64) {
        self.get(i)
            .and_then(|c| c.stats().ok())
            .map_or((0, 0), |s| (s.packets, s.drops))
    }

    /// Port `i`'s figures for the status.
    pub fn facts(&self, i: usize) -> CaptureFacts {
        let (ring_packets, ring_drops) = self.ring_counts(i);
        CaptureFacts {
            ring_packets,
            ring_drops,
            sampling: self.sampling(i),
            counting: self.mode(i),
            counting_hook: self.hook(i).map(str::to_string),
            uncounted_frames: self.uncounted(i),
        }
    }
}
