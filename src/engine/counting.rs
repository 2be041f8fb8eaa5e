//! How each port counts, decided from what the shell saw: where its counting program goes (the
//! tc hook, else the capture socket's filter, else none), its sampling ratio (from the port's
//! packet counter, the frames a drain handed over, or the packets its program saw), whether a
//! second's client rates are whole (a full or unreadable counting map) and whether its capture
//! ring's drops spoil them. The shell carries the answers out ([`Output::AttachHook`],
//! [`Output::SetSampling`]) and reports what happened.

use log::Level;

use super::io::{CountingHook, HookFacts, MapRead, Output, PortRef, PortSecond, Topic};
use super::outbox::Outbox;
use crate::capture::sampling::Sampler;
use crate::config::KernelCounting;
use crate::status::Counting as Mode;

/// One port's counting, as the engine keeps it.
#[derive(Debug, Clone)]
struct PortCounting {
    /// Its capture socket is open.
    open: bool,
    /// The hook asked for and not yet answered.
    pending: Option<CountingHook>,
    /// Where it counts in the kernel (`None`: from captured frames).
    hook: Option<CountingHook>,
    /// Why the tc hook refused the program, while it counts on the socket instead.
    tc_refused: Option<String>,
    sampler: Sampler,
    /// The ring's drop counter as last reported.
    drops_seen: u64,
    /// Its counting map is full (told once per episode).
    full: bool,
    /// Frames its counting map gave to no client since its socket opened.
    uncounted: u64,
}

impl PortCounting {
    fn new(limit: Option<u32>) -> Self {
        PortCounting {
            open: false,
            pending: None,
            hook: None,
            tc_refused: None,
            sampler: Sampler::new(limit),
            drops_seen: 0,
            full: false,
            uncounted: 0,
        }
    }
}

/// Every port's counting: see the module's documentation.
#[derive(Debug)]
pub struct Counting {
    ports: Vec<PortCounting>,
    kernel: KernelCounting,
    /// `[capture]` frames a second a port hands over before it is sampled (`None`: never).
    limit: Option<u32>,
    /// Ports already told why they cannot count in the kernel (said once per port name).
    told: Vec<String>,
}

impl Counting {
    pub fn new(kernel: KernelCounting, limit: Option<u32>) -> Self {
        Counting {
            ports: Vec::new(),
            kernel,
            limit,
            told: Vec::new(),
        }
    }

    fn port(&mut self, i: usize) -> &mut PortCounting {
        if self.ports.len() <= i {
            let limit = self.limit;
            self.ports.resize_with(i + 1, || PortCounting::new(limit));
        }
        &mut self.ports[i]
    }

    /// Port `port`'s capture socket opened (`ok`) or not: a new socket counts exactly, its map
    /// and ring start again. Counting in the kernel is asked for at the tc hook first. True when
    /// its counting is settled already (nothing to attach).
    pub fn opened(&mut self, port: &PortRef, ok: bool, out: &mut Outbox) -> bool {
        let off = self.kernel == KernelCounting::Off;
        let limit = self.limit;
        let p = self.port(port.id.index());
        *p = PortCounting::new(limit);
        p.open = ok;
        if !ok || off {
            return true;
        }
        p.pending = Some(CountingHook::Tc);
        let (port, hook) = (port.clone(), CountingHook::Tc);
        out.push(Output::AttachHook { port, hook });
        false
    }

    /// Port `port`'s socket is closed.
    pub fn closed(&mut self, i: usize) {
        let limit = self.limit;
        *self.port(i) = PortCounting::new(limit);
    }

    /// What became of an [`Output::AttachHook`]: a tc hook that refuses falls back to the
    /// socket's filter; a socket that refuses too leaves the port counting captured frames.
    /// True when the port's counting is settled.
    pub fn hook_attached(
        &mut self,
        port: &PortRef,
        hook: CountingHook,
        result: Result<HookFacts, String>,
        out: &mut Outbox,
    ) -> bool {
        let p = self.port(port.id.index());
        if p.pending != Some(hook) {
            // An answer for a socket that was closed (and maybe opened again) meanwhile.
            return false;
        }
        p.pending = None;
        let name = &port.name;
        match (result, hook) {
            (Ok(f), _) => {
                p.hook = Some(hook);
                let attached = f
                    .tc_attach
                    .map_or(String::new(), |a| format!(", attached: {a}"));
                let text = format!(
                    "port {name}: counting every frame in the kernel (eBPF, map: {}, hook: {}{attached})",
                    f.store,
                    hook.as_str()
                );
                out.log(Level::Info, Topic::Host, text);
                if let (CountingHook::Socket, Some(why)) = (hook, &p.tc_refused) {
                    let text = format!(
                        "port {name}: not at the tc hooks ({why}): a filter on the capture socket \
                         instead, every frame through a packet tap"
                    );
                    out.log(Level::Info, Topic::Host, text);
                }
                if let Some(why) = f.store_fallback {
                    let text = format!("port {name}: no slot table here ({why}): the hash instead");
                    out.log(Level::Info, Topic::Host, text);
                }
                true
            }
            (Err(e), CountingHook::Tc) => {
                p.tc_refused = Some(e);
                p.pending = Some(CountingHook::Socket);
                let (port, hook) = (port.clone(), CountingHook::Socket);
                out.push(Output::AttachHook { port, hook });
                false
            }
            (Err(e), CountingHook::Socket) => {
                self.cannot_count_in_kernel(name, &e, out);
                true
            }
        }
    }

    /// Says once per port why it counts from captured frames instead.
    fn cannot_count_in_kernel(&mut self, name: &str, e: &str, out: &mut Outbox) {
        if self.told.iter().any(|n| n == name) {
            return;
        }
        self.told.push(name.to_string());
        let then = if self.limit.is_some() {
            "counting from captured frames (sampled when busy)"
        } else {
            "counting every captured frame"
        };
        let level = if self.kernel == KernelCounting::Require {
            Level::Error
        } else {
            Level::Info
        };
        let text = format!("port {name}: cannot count in the kernel ({e}); {then}");
        out.log(level, Topic::Host, text);
    }

    /// Whether port `i`'s counting is settled (its socket open, no hook answer awaited).
    pub fn settled(&self, i: usize) -> bool {
        self.ports
            .get(i)
            .is_some_and(|p| p.open && p.pending.is_none())
    }

    /// Where port `i` counts in the kernel, if it does: its ratio then follows the packets its
    /// program saw, not the port's counter or the frames drained.
    pub fn hook(&self, i: usize) -> Option<CountingHook> {
        self.ports.get(i).and_then(|p| p.hook)
    }

    /// Port `i`'s sampling ratio: one IPv4/IPv6 frame in this many is counted.
    pub fn ratio(&self, i: usize) -> u32 {
        self.ports.get(i).map_or(1, |p| p.sampler.ratio())
    }

    /// How port `i` counts, for the status.
    pub fn mode(&self, i: usize) -> Mode {
        match self.ports.get(i) {
            Some(p) if p.hook.is_some() => Mode::Ebpf,
            Some(p) if p.sampler.ratio() > 1 => Mode::Sampled,
            _ => Mode::Exact,
        }
    }

    /// Frames port `i`'s counting map gave to no client since its socket opened.
    pub fn uncounted(&self, i: usize) -> u64 {
        self.ports.get(i).map_or(0, |p| p.uncounted)
    }

    /// Port `port`'s receive packet counter, read at `at_ms` (a port counting in the kernel is
    /// sampled from its program's packets instead: under GRO far fewer).
    pub fn on_counter(&mut self, port: &PortRef, at_ms: u64, rx_packets: u64, out: &mut Outbox) {
        let Some(p) = self.ports.get_mut(port.id.index()) else {
            return;
        };
        if p.hook.is_none() {
            let n = p.sampler.on_counter(at_ms, rx_packets);
            self.apply(port, n, out);
        }
    }

    /// A drain handed over `frames`: a surge raises the ratio before the next counter reading.
    /// Counting in the kernel, only ARP and ND are handed over: no measure of the data's rate.
    pub fn drained(&mut self, port: &PortRef, at_ms: u64, frames: usize, out: &mut Outbox) {
        let Some(p) = self.ports.get_mut(port.id.index()) else {
            return;
        };
        if p.hook.is_none() {
            let n = p.sampler.on_drained(at_ms, frames);
            self.apply(port, n, out);
        }
    }

    /// A new limit (reload): off means exact at once, otherwise the next readings decide.
    pub fn set_limit(&mut self, limit: Option<u32>, refs: &[PortRef], out: &mut Outbox) {
        self.limit = limit;
        for r in refs {
            let n = self.port(r.id.index()).sampler.set_limit(limit);
            self.apply(r, n, out);
        }
    }

    /// A new ratio for `port`, to its capture filter or its counting program.
    fn apply(&self, port: &PortRef, one_in: Option<u32>, out: &mut Outbox) {
        let Some(p) = self.ports.get(port.id.index()).filter(|p| p.open) else {
            return;
        };
        let Some(n) = one_in else {
            return;
        };
        let at = if p.hook.is_some() {
            " in the kernel"
        } else {
            ""
        };
        let name = &port.name;
        let text = if n == 1 {
            format!("port {name}: counting every frame{at}")
        } else {
            format!("port {name}: counting one frame in {n}{at}")
        };
        out.push(Output::SetSampling {
            port: port.clone(),
            one_in: n,
        });
        out.log(Level::Info, Topic::Host, text);
    }

    /// The second's facts: whether every counting map was read whole (a full or unreadable map
    /// misses part of the second), whether a ring whose frames are counted dropped some (where
    /// the kernel counts, the rings carry only ARP and ND, and an ARP storm that fills them
    /// must not stop every move), and each kernel-counting port's ratio from the packets its
    /// program saw. Returns (whole, drops).
    pub fn second(
        &mut self,
        now: u64,
        facts: &[PortSecond],
        refs: &[PortRef],
        out: &mut Outbox,
    ) -> (bool, bool) {
        let mut whole = true;
        for (r, f) in refs.iter().zip(facts) {
            whole &= self.map_read(r, &f.map, out);
        }
        let mut dropped = false;
        for (r, f) in refs.iter().zip(facts) {
            let (Some(p), Some(drops)) = (self.ports.get_mut(r.id.index()), f.ring_drops) else {
                continue;
            };
            // A port that went away has its socket closed: only open ones count.
            if p.open && drops > p.drops_seen {
                let text = format!(
                    "port {}: capture ring dropped {} frames",
                    r.name,
                    drops - p.drops_seen
                );
                out.log(Level::Warn, Topic::Host, text);
                p.drops_seen = drops;
                dropped |= p.hook.is_none();
            }
        }
        for (r, f) in refs.iter().zip(facts) {
            let Some(p) = self.ports.get_mut(r.id.index()) else {
                continue;
            };
            if let (Some(_), Some(pk)) = (p.hook, f.hook_packets) {
                let n = p.sampler.on_counter(now, pk);
                self.apply(r, n, out);
            }
        }
        (whole, dropped)
    }

    /// One port's counting map as read: false when the second's counts miss part of it.
    fn map_read(&mut self, r: &PortRef, map: &MapRead, out: &mut Outbox) -> bool {
        let p = self.port(r.id.index());
        let name = &r.name;
        match map {
            MapRead::NotCounting => true,
            MapRead::Failed(e) => {
                out.log(Level::Warn, Topic::Host, format!("port {name}: {e}"));
                false
            }
            MapRead::Read { lost: 0 } => {
                if std::mem::take(&mut p.full) {
                    let text = format!("port {name}: the counting map has room again");
                    out.log(Level::Info, Topic::Host, text);
                }
                true
            }
            MapRead::Read { lost } => {
                p.uncounted = p.uncounted.saturating_add(*lost);
                if !std::mem::replace(&mut p.full, true) {
                    let text = format!(
                        "port {name}: the counting map is full ({lost} frames counted under no \
                         client this second; more clients than table_size allows?): no move is \
                         made on such seconds"
                    );
                    out.log(Level::Warn, Topic::Host, text);
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests;
