//! The shell's capture side, simulated as `src/daemon/captures.rs` and `counting.rs` do it:
//! each port's socket opened when the engine asks, its counting program put at the hook the
//! engine names (tc, else the socket's filter) or refused, its sampling ratio set to the one the
//! engine chooses; once a second, what it saw. A port counting in the kernel hands the second's
//! counts in with `Input::Second` (its map read whole, the packets its program saw: a packet at
//! the hook is `HOOK_SEG` bytes after GRO), sampled 1 in N as the program samples (one packet in
//! N kept and counted N times). A port whose hooks both refuse counts captured frames: each kept
//! frame (`FRAME_SEG` bytes after GRO; one in N kept by the capture filter) is an
//! `Input::Counted`, then `Input::Drained`, and its ring drops frames on the seconds it drops
//! (a quarter of them, counted as the ring's drops). Where a seed counts is its mode
//! (`mode`); the `Sampling` check holds the engine to its ratio rule as the world sees the
//! port's rate.

use std::collections::HashMap;
use std::net::IpAddr;

use rlbd::capture::ebpf::{Delta, EntryKey};
use rlbd::client::ClientKey;
use rlbd::engine::{CountingHook, HookFacts, Input, MapRead, Output, PortId, PortRef, PortSecond};
use rlbd::simulate::generate::Rng;

use super::checks::Check;
use super::driver::Driver;
use rlbd::simulate::lan::nd::SERVER6;

/// Bytes of a packet at the counting hook, and of a captured frame, after GRO.
const HOOK_SEG: u64 = 4_000;
const FRAME_SEG: u64 = 8_000;
/// `[capture] max_frames_per_sec` of the sampled modes: a loaded 100 Mbit/s port is sampled 1 in
/// 2 to 8 (its hook's packets, or its wire packets for captured frames).
const HOOK_LIMIT: u32 = 800;
const FRAMES_LIMIT: u32 = 1_600;

/// The seconds of a port's rate the `Sampling` check weighs: a ratio is lowered after five calm
/// readings to what they call for, and holds five more before it is lowered again.
const RATES_KEPT: usize = 11;

/// Where a seed's ports count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// At the tc hook, every frame (the default limit is never reached here).
    Tc,
    /// tc refuses; the capture socket's filter counts, every frame.
    Socket,
    /// At the tc hook, at a limit a loaded port passes: sampled.
    TcSampled,
    /// Both hooks refuse: captured frames, one `Input::Counted` each, sampled.
    Frames,
}

/// Seed `seed`'s mode: every fourth seed counts captured frames (4, 8, ...), every fourth is
/// sampled at the tc hook (2, 6, ...), the others count at tc (1, 5, ...) or on the socket (3,
/// 7, ...). `RLBD_SIM_COUNTING=tc|socket|hook|frames` gives every seed that mode.
pub fn mode(seed: u64) -> Mode {
    match std::env::var("RLBD_SIM_COUNTING").as_deref() {
        Ok("tc") => Mode::Tc,
        Ok("socket") => Mode::Socket,
        Ok("hook") => Mode::TcSampled,
        Ok("frames") => Mode::Frames,
        Ok(other) => panic!("RLBD_SIM_COUNTING: tc, socket, hook or frames, not {other:?}"),
        Err(_) => [Mode::Frames, Mode::Tc, Mode::TcSampled, Mode::Socket][(seed % 4) as usize],
    }
}

/// The bits of a packet where the mode's ports are sampled: the hook's (after GRO), or the
/// wire's for captured frames (their sampler reads the port's packet counter).
pub fn packet_bits(mode: Mode) -> f64 {
    match mode {
        Mode::Frames => 8_000.0,
        _ => (HOOK_SEG * 8) as f64,
    }
}

/// The mode's `max_frames_per_sec`.
pub fn limit(mode: Mode) -> u32 {
    match mode {
        Mode::TcSampled => HOOK_LIMIT,
        Mode::Frames => FRAMES_LIMIT,
        _ => rlbd::capture::sampling::DEFAULT_MAX_FRAMES_PER_SEC,
    }
}

/// One port's capture as the shell holds it.
#[derive(Debug, Clone, Default)]
struct Cap {
    /// When its socket opened.
    opened: u64,
    /// Its counting program is attached (it counts in the kernel).
    kernel: bool,
    one_in: u32,
    /// Packets its program saw, frames its ring dropped, since the socket opened.
    hook_packets: u64,
    drops: u64,
    /// Its drops as last reported.
    reported: u64,
    /// The port's rate (packets a second, as its sampler reads it) in each of the last
    /// `RATES_KEPT` seconds.
    rates: Vec<f64>,
    last_packets: Option<u64>,
}

/// Every port's capture, by ifindex.
pub struct Capture {
    pub mode: Mode,
    ports: HashMap<u32, Cap>,
}

impl Capture {
    pub fn new(mode: Mode) -> Capture {
        Capture {
            mode,
            ports: HashMap::new(),
        }
    }

    /// A new daemon: no socket is open.
    pub fn restart(&mut self) {
        self.ports.clear();
    }

    /// `Output::OpenCapture`: a new socket counts every frame it captures.
    pub fn opened(&mut self, now: u64, ifindex: u32) {
        let cap = Cap {
            opened: now,
            one_in: 1,
            ..Cap::default()
        };
        self.ports.insert(ifindex, cap);
    }

    pub fn closed(&mut self, ifindex: u32) {
        self.ports.remove(&ifindex);
    }

    /// `Output::AttachHook`: what the kernel makes of it, in this mode.
    pub fn attach(&mut self, port: &PortRef, hook: CountingHook) -> Result<HookFacts, String> {
        let ok = matches!(
            (self.mode, hook),
            (Mode::Tc | Mode::TcSampled, CountingHook::Tc) | (Mode::Socket, CountingHook::Socket)
        );
        let Some(cap) = self.ports.get_mut(&port.ifindex).filter(|_| ok) else {
            return Err(match hook {
                CountingHook::Tc => "tc: Operation not permitted (no CAP_NET_ADMIN)".into(),
                CountingHook::Socket => "the verifier refused the program: permission denied \
                     (Linux 5.10 without CAP_PERFMON)"
                    .into(),
            });
        };
        cap.kernel = true;
        cap.hook_packets = 0;
        Ok(HookFacts {
            store: "slots",
            tc_attach: (hook == CountingHook::Tc).then_some("tcx"),
            store_fallback: None,
        })
    }

    /// `Output::SetSampling`.
    pub fn set_sampling(&mut self, ifindex: u32, one_in: u32) {
        if let Some(cap) = self.ports.get_mut(&ifindex) {
            cap.one_in = one_in.max(1);
        }
    }
}

/// A binomial draw: how many of `n` packets a 1-in-`one_in` sampler keeps (waiting times for
/// few, the normal approximation for many).
fn kept(rng: &mut Rng, n: u64, one_in: u32) -> u64 {
    if one_in <= 1 || n == 0 {
        return n;
    }
    let p = 1.0 / f64::from(one_in);
    let mean = n as f64 * p;
    if mean > 30.0 {
        let sd = (mean * (1.0 - p)).sqrt();
        let (u1, u2) = (rng.unit().max(1e-12), rng.unit());
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        return (mean + sd * z).round().clamp(0.0, n as f64) as u64;
    }
    let (mut at, mut k) = (0u64, 0u64);
    let q = (1.0 - p).ln();
    loop {
        at += 1 + (rng.unit().max(1e-12).ln() / q) as u64;
        if at > n {
            return k;
        }
        k += 1;
    }
}

/// One client's traffic on one port in a second: who, its addresses, its bytes.
struct Flow {
    client: ClientKey,
    src: IpAddr,
    dst: IpAddr,
    bytes: u64,
}

impl Driver {
    /// A capture socket closed, a counting program attached (or refused, the answer handed in
    /// as the shell's queue hands it), a sampling ratio set.
    pub fn carry_capture(&mut self, out: Output) {
        match out {
            Output::CloseCapture { port } => self.capture.closed(port.ifindex),
            Output::AttachHook { port, hook } => {
                let result = self.capture.attach(&port, hook);
                let input = Input::HookAttached {
                    port: port.id,
                    hook,
                    result,
                };
                self.engine.handle(self.now, input);
            }
            Output::SetSampling { port, one_in } => {
                self.stats.sampling_changes += 1;
                self.capture.set_sampling(port.ifindex, one_in);
            }
            _ => {}
        }
    }

    /// The clients too faint for their port's sampling to show the engine every minute (under
    /// twice its resolution): it may forget their moves as idle.
    pub fn faint_clients(&self) -> Vec<(rlbd::Mac, u16)> {
        let bits = packet_bits(self.capture.mode);
        let w = &self.world;
        w.clients
            .iter()
            .filter(|c| c.present)
            .filter(|c| {
                let port = c.target().and_then(|m| w.port_of_mac(m));
                let one_in = port
                    .and_then(|p| self.capture.ports.get(&w.ports[p].ifindex))
                    .map_or(1, |cap| cap.one_in);
                let res = rlbd::policy::sampling_resolution_bps(one_in, bits);
                c.delivered_bps < 2.0 * res
            })
            .map(|c| (c.mac, c.vlan))
            .collect()
    }

    /// World port `p`'s engine port index, as of the last remap.
    fn map_of(&self, p: usize) -> Option<usize> {
        self.map.get(p).copied().flatten()
    }

    /// The second's traffic as the ports counted it: the kernel's counts (returned, for
    /// `Input::Second`), and each captured frame handed in one by one; then each port's facts,
    /// by the engine's port index.
    pub fn count_second(&mut self, drops: bool) -> (Vec<(PortId, Delta)>, Vec<PortSecond>, bool) {
        self.remap();
        let mut counts = Vec::new();
        let mut frames = vec![0usize; self.world.ports.len()];
        for (p, c, bytes) in self.world.traffic() {
            let Some(ep) = self.map_of(p) else {
                continue;
            };
            let cl = &self.world.clients[c];
            self.rules.moves.counted_on.insert((cl.mac, cl.vlan), p);
            let client = ClientKey::new(cl.mac, cl.vlan);
            let v4 = (IpAddr::V4(cl.ip), IpAddr::V4(cl.server));
            let mut flows = Vec::with_capacity(2);
            match cl.ip6 {
                None => flows.push(Flow {
                    client,
                    src: v4.0,
                    dst: v4.1,
                    bytes,
                }),
                Some(ip6) => {
                    let (src, dst) = (ip6.into(), SERVER6.into());
                    flows.push(Flow {
                        client,
                        src,
                        dst,
                        bytes,
                    });
                    if cl.dual {
                        flows.push(Flow {
                            client,
                            src: v4.0,
                            dst: v4.1,
                            bytes: bytes / 100 + 64,
                        });
                    }
                }
            }
            let ifindex = self.world.ports[p].ifindex;
            for f in flows {
                frames[p] += self.count_flow(ifindex, PortId::new(ep), &f, drops, &mut counts);
            }
        }
        let (facts, dropped) = self.port_facts(&frames, drops);
        (counts, facts, dropped)
    }

    /// One flow's second on a port: into the kernel's counts, or as captured frames handed in.
    /// The frames handed in.
    fn count_flow(
        &mut self,
        ifindex: u32,
        port: PortId,
        f: &Flow,
        drops: bool,
        counts: &mut Vec<(PortId, Delta)>,
    ) -> usize {
        let Some(cap) = self.capture.ports.get_mut(&ifindex) else {
            return 0;
        };
        if cap.one_in > 1 {
            self.stats.sampled_counts += 1;
        }
        let rng = &mut self.world.rng;
        let n = cap.one_in;
        if cap.kernel {
            let packets = f.bytes.div_ceil(HOOK_SEG).max(1);
            cap.hook_packets += packets;
            let k = kept(rng, packets, n);
            if k > 0 {
                let key = EntryKey {
                    client: f.client,
                    dst: f.dst,
                };
                let frames = k * u64::from(n);
                let bytes = if n == 1 {
                    f.bytes
                } else {
                    frames * (f.bytes / packets)
                };
                counts.push((
                    port,
                    Delta {
                        key,
                        frames,
                        bytes,
                        src: Some(f.src),
                    },
                ));
            }
            return 0;
        }
        let segs = f.bytes.div_ceil(FRAME_SEG).max(1);
        let mut k = kept(rng, segs, n);
        if drops {
            let lost = k / 4;
            cap.drops += lost;
            k -= lost;
        }
        let bytes = (f.bytes / segs) * u64::from(n);
        let dst_mac = self
            .world
            .ports
            .iter()
            .find(|p| p.ifindex == ifindex)
            .map_or(rlbd::Mac::zero(), |p| p.mac);
        for _ in 0..k {
            let input = Input::Counted {
                port,
                key: f.client,
                src: f.src,
                dst: f.dst,
                bytes,
                for_host: true,
                dst_mac,
            };
            self.engine.handle(self.now, input);
        }
        self.stats.frames_counted += k;
        k as usize
    }

    /// Each port's drain of the second, and its facts by the engine's port index (and whether a
    /// ring whose frames are counted dropped some); the ports' rates for the `Sampling` check.
    fn port_facts(&mut self, frames: &[usize], drops: bool) -> (Vec<PortSecond>, bool) {
        let n = self.engine.ports().list.len();
        let mut facts = vec![PortSecond::default(); n];
        let mut dropped = false;
        for (p, &handed) in frames.iter().enumerate() {
            let Some(ep) = self.map_of(p).filter(|ep| *ep < n) else {
                continue;
            };
            let w = &self.world.ports[p];
            let wire = w.rx_bytes / 1000;
            let Some(cap) = self.capture.ports.get_mut(&w.ifindex) else {
                continue;
            };
            // A ring whose frames are ARP and ND alone (the program counts) drops some too.
            if drops && cap.kernel {
                cap.drops += 1;
            }
            dropped |= !cap.kernel && cap.drops > cap.reported;
            cap.reported = cap.drops;
            let packets = if cap.kernel { cap.hook_packets } else { wire };
            let rate = cap.last_packets.map(|l| packets.saturating_sub(l) as f64);
            cap.last_packets = Some(packets);
            cap.rates.push(rate.unwrap_or(0.0));
            if cap.rates.len() > RATES_KEPT {
                cap.rates.remove(0);
            }
            facts[ep] = PortSecond {
                hook_packets: cap.kernel.then_some(cap.hook_packets),
                ring_drops: Some(cap.drops),
                map: if cap.kernel {
                    MapRead::Read { lost: 0 }
                } else {
                    MapRead::NotCounting
                },
            };
            if !cap.kernel {
                let input = Input::Drained {
                    port: PortId::new(ep),
                    frames: handed,
                };
                self.input(input);
            }
        }
        (facts, dropped)
    }

    /// The ratio rule, as the world sees each port's rate: up at once (after its socket's first
    /// seconds, no port counts more than its limit two seconds on end), down only after five calm
    /// seconds, and then to what they call for (never coarser than its last ten seconds' rates
    /// call for at half the limit).
    pub fn sampling_follows(&mut self) {
        // Nobody counts while the daemon is down; its successor opens its own sockets.
        if self.down.is_some() {
            return;
        }
        let limit = f64::from(limit(self.capture.mode));
        let pow2 = |rate: f64, limit: f64| -> u32 {
            let mut n = 1u32;
            while rate / f64::from(n) > limit && n < 1 << 16 {
                n *= 2;
            }
            n
        };
        let mut ports: Vec<(&u32, &Cap)> = self.capture.ports.iter().collect();
        ports.sort_by_key(|(i, _)| **i);
        for (ifindex, cap) in ports {
            let Some(&rate) = cap.rates.last() else {
                continue;
            };
            // A link message (a carrier change, a re-dump) shortly before the second's reading
            // takes its place (the sampler wants readings 500 ms apart): the rate must hold two
            // readings on end.
            let n = cap.rates.len();
            let settled = self.now >= cap.opened + 3_000 && n >= 3;
            let rate = if n >= 2 {
                rate.min(cap.rates[n - 2])
            } else {
                rate
            };
            let low = pow2(rate, limit);
            let high = cap
                .rates
                .iter()
                .map(|r| pow2(*r, limit / 2.0))
                .max()
                .unwrap_or(1);
            let why = if settled && cap.one_in < low {
                format!("counts 1 in {} at {rate:.0} packets a second (limit {limit}): 1 in {low} at least", cap.one_in)
            } else if cap.one_in > high.max(1) {
                format!("counts 1 in {} where its last seconds ({:?} packets a second) call for 1 in {high} at most", cap.one_in, cap.rates)
            } else {
                continue;
            };
            let why = format!("port (ifindex {ifindex}) {why}");
            return self.fail(Check::Sampling, why);
        }
    }
}
