//! The capture sockets, one per port, indexed like the engine's ports: opened when the engine
//! says a port appeared, closed when it goes, re-filtered for the MACs it gives, their counting
//! program attached at the hook it names, their sampling ratio set to the one it chooses, and
//! used to send its frames out of the right port. Once a second, what each socket saw: the
//! counts of its map, its ring's drops, the packets its program saw. It decides nothing; its
//! own I/O errors are logged here.

use std::io;

use log::{debug, error, warn};
use mio::{Interest, Registry, Token};

use crate::capture::ebpf::Delta;
use crate::capture::{CaptureSocket, RingConfig};
use crate::engine::{CaptureFacts, CountingHook, HookFacts, MapRead, PortId, PortRef, PortSecond};

pub struct Captures {
    socks: Vec<Option<CaptureSocket>>,
    /// Frames may be waiting on this socket (edge-triggered readiness, bounded batches).
    pub ready: Vec<bool>,
    ring: RingConfig,
    base: usize,
    /// The present ports' MACs, as the engine last gave them.
    port_macs: Vec<crate::Mac>,
    /// The server's other MACs (a macvlan's, a bridge's own), as the engine last gave them:
    /// the counting programs count frames to them too.
    host_macs: Vec<crate::Mac>,
    /// The size of each port's counting map.
    map_entries: u32,
}

impl Captures {
    /// `base`: the mio token of port 0's socket; port `i` uses `base + i`. `map_entries`: the
    /// size of each port's counting map.
    pub fn new(ring: RingConfig, base: usize, map_entries: u32) -> Self {
        Captures {
            socks: Vec::new(),
            ready: Vec::new(),
            ring,
            base,
            port_macs: Vec::new(),
            host_macs: Vec::new(),
            map_entries,
        }
    }

    /// The MACs every filter passes: the ports' and the host interfaces', as many as a filter
    /// holds (the engine warns when there are more).
    fn macs(&self) -> Vec<crate::Mac> {
        let mut macs = self.port_macs.clone();
        for m in &self.host_macs {
            if !macs.contains(m) {
                macs.push(*m);
            }
        }
        macs.truncate(crate::capture::filter::MAX_MACS);
        macs
    }

    /// The present ports' MACs (a new set re-filters every socket).
    pub fn set_port_macs(&mut self, macs: Vec<crate::Mac>) {
        self.port_macs = macs;
        self.refilter();
    }

    /// The host interfaces' own MACs that are no port's (every socket re-filtered, every
    /// counting program told).
    pub fn set_host_macs(&mut self, macs: Vec<crate::Mac>) {
        self.host_macs = macs;
        self.refilter();
        for c in self.socks.iter_mut().flatten() {
            if c.counts_in_kernel() {
                if let Err(e) = c.set_count_macs(&self.host_macs) {
                    error!("port {}: cannot update the counting program: {e}", c.name());
                }
            }
        }
    }

    /// Port `i`'s socket.
    pub fn socket(&mut self, i: usize) -> Option<&mut CaptureSocket> {
        self.socks.get_mut(i)?.as_mut()
    }

    fn grow(&mut self, n: usize) {
        if self.socks.len() < n {
            self.socks.resize_with(n, || None);
            self.ready.resize(n, false);
        }
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

    /// Opens (and registers) the socket of `port`, replacing any old one. It counts every
    /// frame it captures until the engine asks for more ([`Self::attach_hook`],
    /// [`Self::set_sampling`]).
    pub fn open(&mut self, port: &PortRef, registry: &Registry) -> io::Result<()> {
        let i = port.id.index();
        self.grow(i + 1);
        self.close(i, registry);
        let mut c = CaptureSocket::open(&port.name, port.ifindex, &self.macs(), &self.ring)?;
        if let Err(e) = registry.register(&mut c, Token(self.base + i), Interest::READABLE) {
            error!("port {}: cannot register capture socket: {e}", port.name);
        }
        self.socks[i] = Some(c);
        // Frames may already be waiting; edge-triggered readiness would not report them.
        self.ready[i] = true;
        Ok(())
    }

    /// Puts `port`'s counting program at `hook`: what the kernel made of it, or its refusal.
    pub fn attach_hook(
        &mut self,
        port: &PortRef,
        hook: CountingHook,
        registry: &Registry,
    ) -> Result<HookFacts, String> {
        let i = port.id.index();
        let (host_macs, entries) = (&self.host_macs, self.map_entries);
        let Some(c) = self.socks.get_mut(i).and_then(Option::as_mut) else {
            return Err(format!("port {}: no capture socket", port.name));
        };
        let r = match hook {
            CountingHook::Tc => c.count_at_tc(host_macs, entries),
            CountingHook::Socket => c.count_on_socket(host_macs, entries),
        };
        r.map_err(|e| e.to_string())?;
        // At the tc hook ARP and ND come through the program's ring buffer: its descriptor is
        // polled too.
        let token = Token(self.base + i);
        let _ = registry.deregister(c);
        if let Err(e) = registry.register(c, token, Interest::READABLE) {
            error!("port {}: cannot register capture socket: {e}", port.name);
        }
        self.ready[i] = true;
        Ok(HookFacts {
            store: c.kernel_store().unwrap_or("?"),
            tc_attach: c.kernel_tc_attach(),
            store_fallback: c.kernel_store_fallback().map(str::to_string),
        })
    }

    /// Port `port` keeps one IPv4/IPv6 frame in `one_in` from now on.
    pub fn set_sampling(&self, port: &PortRef, one_in: u32) {
        if let Some(c) = self.get(port.id.index()) {
            if let Err(e) = c.set_sampling(one_in) {
                warn!("port {}: sampling ratio not changed: {e}", port.name);
            }
        }
    }

    pub fn close(&mut self, i: usize, registry: &Registry) {
        self.grow(i + 1);
        if let Some(mut c) = self.socks[i].take() {
            let _ = registry.deregister(&mut c);
        }
        self.ready[i] = false;
    }

    /// Re-filters every socket for the ports' (and host interfaces') MACs.
    fn refilter(&self) {
        let macs = self.macs();
        for c in self.socks.iter().flatten() {
            if let Err(e) = c.set_macs(&macs) {
                error!("port {}: cannot update capture filter: {e}", c.name());
            }
        }
    }

    /// Sends one frame out of `port`: `None` when the port has no socket, else what the kernel
    /// said (its errno kept, for the engine's retry decision).
    pub fn try_send(&self, port: PortId, frame: &[u8]) -> Option<io::Result<()>> {
        Some(self.get(port.index())?.send(frame))
    }

    /// The second's facts of every socket, by port: what its counting map counted, into
    /// `counts` (cleared first), whether the map was read whole and how many frames it gave to
    /// no client; its ring's drops since it opened; the packets its program saw.
    pub fn second(
        &mut self,
        counts: &mut Vec<(PortId, Delta)>,
        buf: &mut Vec<Delta>,
        facts: &mut Vec<PortSecond>,
    ) {
        counts.clear();
        facts.clear();
        for (i, c) in self.socks.iter_mut().enumerate() {
            let Some(c) = c.as_mut() else {
                facts.push(PortSecond::default());
                continue;
            };
            let mut f = PortSecond::default();
            if c.counts_in_kernel() {
                f.map = match c.read_counts(buf) {
                    Ok(lost) => MapRead::Read { lost },
                    Err(e) => MapRead::Failed(e.to_string()),
                };
                counts.extend(buf.drain(..).map(|d| (PortId::new(i), d)));
                f.hook_packets = c.hook_packets();
            }
            f.ring_drops = match c.stats() {
                Ok(s) => Some(s.drops),
                Err(e) => {
                    debug!("port {}: cannot read ring statistics: {e}", c.name());
                    None
                }
            };
            facts.push(f);
        }
    }

    /// Port `i`'s figures for the status.
    pub fn facts(&self, i: usize) -> CaptureFacts {
        let (ring_packets, ring_drops) = self
            .get(i)
            .and_then(|c| c.stats().ok())
            .map_or((0, 0), |s| (s.packets, s.drops));
        CaptureFacts {
            ring_packets,
            ring_drops,
            sampling: self.get(i).map_or(1, |c| c.sampling()),
        }
    }
}
