//! The daemon's shell, simulated: the scenario's slaves as plain ports and its clients as
//! confirmed neighbours, handed to the daemon's own [`Engine`] through its door. The engine
//! decides (the detector, the hold-down, the ceiling it learns, the planner, confirm-before-send
//! and the limits); this shell only tells it what the simulated LAN did and carries out what it
//! asks: counters read, ratios set, update frames sent (a client moves to the port the update
//! names).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use crate::capture::ebpf::{Delta, EntryKey};
use crate::client::ClientKey;
use crate::config::{CaptureConfig, Settings, Target};
use crate::engine::{Engine, Input, Output, PortId, SendTag, Topic, EVAL_DELAY_MS};
use crate::logging::MessageId;
use crate::netlink::{AddrEntry, LinkInfo, NeighEntry, NlEvent};
use crate::policy::Reason;
use crate::Mac;

use super::{MoveOut, Scenario};

/// The server's address; the clients' are 198.18.1.10 onwards, in its /16.
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

/// The engine's clock at the start of tick 0, ms: it started a second earlier.
const START: u64 = 1000;

/// What the engine made of one second.
pub struct Decided {
    /// Its moves, as its log records tell them.
    pub moves: Vec<MoveOut>,
    /// Each slave's detector holds it overloaded.
    pub overloaded: Vec<bool>,
}

/// One simulated port: what the kernel would tell of it.
struct SimPort {
    name: String,
    ifindex: u32,
    mac: Mac,
    up: bool,
    rx_bytes: u64,
    /// Packets, fractional between seconds (a second's bytes over the packet size).
    rx_packets: f64,
}

pub struct Shell {
    engine: Engine,
    now: u64,
    ports: Vec<SimPort>,
    /// Client index -> its address and MAC, and back.
    ips: Vec<Ipv4Addr>,
    macs: Vec<Mac>,
    by_ip: HashMap<IpAddr, usize>,
    by_mac: HashMap<Mac, usize>,
    /// The scenario's names of the clients, for the output.
    labels: Vec<String>,
    packet_bytes: f64,
    /// Each slave's sampling ratio, as the engine set it.
    pub one_in: Vec<u32>,
    /// Update frames that went out: (client, slave), for the world to land.
    updates: Vec<(usize, usize)>,
    /// The moves logged since the last second, by client index.
    moves: Vec<(usize, MoveOut)>,
    /// Each client's rate as last counted, Mbit/s: what the engine's table holds of it.
    counted: Vec<f64>,
}

/// The daemon's settings for the scenario: its slaves as plain ports with their capacities,
/// its policy, and counting as the scenario's `sampling` says (absent: every frame).
fn settings(s: &Scenario) -> Settings {
    let names: Vec<String> = s.slaves.iter().map(|p| p.name.clone()).collect();
    let mut capture = CaptureConfig {
        table_size: (2 * s.clients.len()).max(128),
        counting: "packet".into(),
        sampling: "off".into(),
        ..Default::default()
    };
    if let Some(spec) = &s.sampling {
        capture.sampling = "auto".into();
        capture.max_frames_per_sec = spec.max_frames_per_sec;
    }
    Settings {
        policy: s.config.clone(),
        capacity_mbps: s
            .slaves
            .iter()
            .map(|p| (p.name.clone(), p.capacity_mbps))
            .collect(),
        capture,
        ..Settings::for_target(Target::Ports(names))
    }
}

impl Shell {
    pub fn new(s: &Scenario) -> Shell {
        let ports = s
            .slaves
            .iter()
            .enumerate()
            .map(|(i, p)| SimPort {
                name: p.name.clone(),
                ifindex: 2 + i as u32,
                mac: Mac(2, 0, 0, 1, (i >> 8) as u8, i as u8),
                up: true,
                rx_bytes: 0,
                rx_packets: 0.0,
            })
            .collect();
        let n = s.clients.len();
        let ips: Vec<Ipv4Addr> = (0..n)
            .map(|i| Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 1, 10)) + i as u32))
            .collect();
        let macs: Vec<Mac> = (0..n)
            .map(|i| Mac(2, 0, 0, 2, (i >> 8) as u8, i as u8))
            .collect();
        let mut sh = Shell {
            engine: Engine::new(settings(s), 0),
            now: 0,
            ports,
            by_ip: ips
                .iter()
                .enumerate()
                .map(|(i, ip)| ((*ip).into(), i))
                .collect(),
            by_mac: macs.iter().enumerate().map(|(i, m)| (*m, i)).collect(),
            ips,
            macs,
            labels: s.clients.iter().map(|c| c.ip.clone()).collect(),
            packet_bytes: s
                .sampling
                .as_ref()
                .map_or(1500.0, |k| k.packet_bytes.max(1.0)),
            one_in: vec![1; s.slaves.len()],
            updates: Vec::new(),
            moves: Vec::new(),
            counted: vec![0.0; n],
        };
        let dump = sh.dump();
        sh.input(Input::Netlink(&dump));
        sh.input(Input::Started);
        // The daemon runs a quiet second before the scenario's first tick: its counters are
        // read once before any traffic, so that tick 0's rate is known (two readings make a
        // rate), as for a daemon already running when the load comes.
        sh.deadlines(START - 1);
        sh.now = START;
        sh.input(Input::Second {
            counts: &[],
            ports: &[],
        });
        sh
    }

    /// What the kernel would say in a dump: the ports with their counters, the server's
    /// address on the first, every client's neighbour entry there (confirmed: each has talked
    /// to the server).
    fn dump(&self) -> Vec<NlEvent> {
        let mut ev: Vec<NlEvent> = (0..self.ports.len()).map(|p| self.link(p, true)).collect();
        let home = self.ports[0].ifindex;
        ev.push(NlEvent::Addr(AddrEntry {
            ifindex: home,
            network: format!("{SERVER}/16").parse().expect("a network"),
        }));
        ev.extend(self.ips.iter().zip(&self.macs).map(|(ip, mac)| {
            NlEvent::Neigh(NeighEntry {
                ifindex: home,
                ip: (*ip).into(),
                mac: Some(*mac),
                state: libc::NUD_REACHABLE,
            })
        }));
        ev
    }

    /// Port `p`'s link message, with its counters (`counters`: a reading) or without.
    fn link(&self, p: usize, counters: bool) -> NlEvent {
        let port = &self.ports[p];
        NlEvent::Link(LinkInfo {
            index: port.ifindex,
            name: port.name.clone(),
            mac: Some(port.mac),
            admin_up: true,
            oper_up: port.up,
            rx_bytes: counters.then_some(port.rx_bytes),
            rx_packets: counters.then_some(port.rx_packets as u64),
            ..LinkInfo::default()
        })
    }

    /// Hands one input in and carries out everything it leads to.
    fn input(&mut self, input: Input) {
        self.engine.handle(self.now, input);
        while let Some(out) = self.engine.poll_output() {
            self.carry_out(out);
        }
    }

    fn slave(&self, name: &str) -> Option<usize> {
        self.ports.iter().position(|p| p.name == name)
    }

    fn carry_out(&mut self, out: Output) {
        let now = self.now;
        match out {
            Output::Send { port, tag, frame } => {
                let to = self.slave(&port.name);
                let up = to.is_some_and(|p| self.ports[p].up);
                let result = if up {
                    Ok(())
                } else {
                    Err(Some(libc::ENETDOWN))
                };
                if let (SendTag::Update { client, .. }, Some(to), true) = (tag, to, up) {
                    if let Some(&c) = self.by_mac.get(&client.mac) {
                        self.updates.push((c, to));
                    }
                }
                self.engine
                    .handle(now, Input::SendResult { tag, frame, result });
            }
            Output::OpenCapture { port } => {
                // No speed: the scenario's capacities are the settings' `[capacity]`.
                let input = Input::CaptureOpened {
                    port: port.id,
                    speed_mbps: None,
                    error: None,
                };
                self.engine.handle(now, input);
            }
            Output::RequestCounters { ifindex } => {
                if let Some(p) = self.ports.iter().position(|p| p.ifindex == ifindex) {
                    let ev = [self.link(p, true)];
                    self.engine.handle(now, Input::Netlink(&ev));
                }
            }
            Output::Redump => {
                let dump = self.dump();
                self.engine.handle(now, Input::Netlink(&dump));
            }
            Output::SetSampling { port, one_in } => {
                if let Some(p) = self.slave(&port.name) {
                    self.one_in[p] = one_in.max(1);
                }
            }
            Output::Log {
                topic: Topic::Move,
                text,
                fields,
                ..
            } if fields.id == Some(MessageId::Move) => self.record_move(&text, &fields),
            _ => {}
        }
    }

    /// A move's log record as the scenario's output: its client, ports, rate and reason.
    fn record_move(&mut self, text: &str, f: &crate::logging::Fields) {
        let client = f.client.and_then(|ip| self.by_ip.get(&ip)).copied();
        let (Some(c), Some(from), Some(to), Some(reason)) = (
            client,
            f.from_port.clone(),
            f.port.clone(),
            f.reason.and_then(reason),
        ) else {
            return;
        };
        // The line gives the rate to a tenth; the count the engine read it from, exactly.
        let logged = rate_of(text).unwrap_or(0.0);
        let exact = self.counted[c];
        let rate_mbps = if (exact - logged).abs() <= 0.05 + 1e-9 {
            (exact * 1000.0).round() / 1000.0
        } else {
            logged
        };
        let out = MoveOut {
            client: self.labels[c].clone(),
            from,
            to,
            rate_mbps,
            reason,
        };
        self.moves.push((c, out));
    }

    /// Deadlines the engine asked for up to `until` (inclusive), in order; the clock ends there.
    fn deadlines(&mut self, until: u64) {
        while let Some(d) = self.engine.next_deadline().filter(|d| *d <= until) {
            self.now = self.now.max(d);
            self.input(Input::Deadline);
        }
        self.now = self.now.max(until);
    }

    /// Slave `p`'s carrier changed, at the start of tick `t`.
    pub fn carrier(&mut self, t: u64, p: usize, up: bool) {
        if self.ports[p].up == up {
            return;
        }
        self.deadlines(START + t * 1000);
        self.ports[p].up = up;
        // No counters: a reading off the second's edge would skew the rate.
        let ev = [self.link(p, false)];
        self.input(Input::Netlink(&ev));
    }

    /// Tick `t` ended: each slave received `rx` Mbit/s, each client was counted at `counted`
    /// Mbit/s on slave `on` (0: not counted). The engine's second, and its evaluation
    /// `EVAL_DELAY_MS` after.
    pub fn second(&mut self, t: u64, rx: &[f64], on: &[usize], counted: &[f64]) -> Decided {
        let end = START + (t + 1) * 1000;
        self.deadlines(end.saturating_sub(1));
        self.now = end;
        for (p, mbps) in rx.iter().enumerate() {
            let bytes = mbps * 1e6 / 8.0;
            self.ports[p].rx_bytes += bytes.round() as u64;
            self.ports[p].rx_packets += bytes / self.packet_bytes;
        }
        let counts = self.counts(on, counted);
        self.counted.copy_from_slice(counted);
        self.input(Input::Second {
            counts: &counts,
            ports: &[],
        });
        self.deadlines(end + EVAL_DELAY_MS);
        let overloaded = self
            .ports
            .iter()
            .map(|sp| {
                let list = &self.engine.ports().list;
                list.iter()
                    .find(|p| p.name == sp.name)
                    .is_some_and(|p| p.detector.overloaded())
            })
            .collect();
        // The clients land in the order the engine decided their moves (the world draws each
        // arrival's share weight in turn).
        let order = |c: usize| self.moves.iter().position(|(m, _)| *m == c);
        self.updates
            .sort_by_key(|(c, _)| order(*c).unwrap_or(usize::MAX));
        Decided {
            moves: std::mem::take(&mut self.moves)
                .into_iter()
                .map(|(_, m)| m)
                .collect(),
            overloaded,
        }
    }

    /// The second's counts, as the kernel's counting hands them over.
    fn counts(&self, on: &[usize], counted: &[f64]) -> Vec<(PortId, Delta)> {
        let engine_port = |p: usize| {
            let name = &self.ports[p].name;
            self.engine
                .ports()
                .list
                .iter()
                .position(|x| &x.name == name)
        };
        let mut counts = Vec::new();
        for (c, (&p, &mbps)) in on.iter().zip(counted).enumerate() {
            let bytes = (mbps * 1e6 / 8.0).round() as u64;
            let Some(ep) = engine_port(p).filter(|_| bytes > 0) else {
                continue;
            };
            counts.push((
                PortId::new(ep),
                Delta {
                    key: EntryKey {
                        client: ClientKey::untagged(self.macs[c]),
                        dst: IpAddr::V4(SERVER),
                    },
                    frames: (bytes as f64 / self.packet_bytes).ceil() as u64,
                    bytes,
                    src: Some(IpAddr::V4(self.ips[c])),
                },
            ));
        }
        counts
    }

    /// The update frames that went out since the last call: (client, slave).
    pub fn take_updates(&mut self) -> Vec<(usize, usize)> {
        std::mem::take(&mut self.updates)
    }
}

fn reason(s: &str) -> Option<Reason> {
    [
        Reason::Overload,
        Reason::Failover,
        Reason::Placement,
        Reason::Room,
        Reason::Settle,
    ]
    .into_iter()
    .find(|r| r.as_str() == s)
}

/// The rate in a move's line ("...: 12.3 Mbit/s; ...").
fn rate_of(text: &str) -> Option<f64> {
    let head = &text[..text.find(" Mbit/s")?];
    head.rsplit(' ').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::super::{parse, run};

    /// Two clients of 600 Mbit/s on one 1 Gbit/s slave from the first tick: the engine's
    /// detector holds it overloaded at its second sample over the threshold (the engine ran a
    /// quiet second before, so tick 0's rate is known), and its move record is what is printed.
    #[test]
    fn the_engine_decides_and_its_move_record_is_printed() {
        let s = parse(
            r#"{"slaves":[{"name":"a","capacity_mbps":1000},{"name":"b","capacity_mbps":1000}],
                "clients":[{"ip":"c1","slave":"a"},{"ip":"c2","slave":"a"}],
                "ticks":[{"demand_mbps":{"c1":600,"c2":500}},{},{},{},{}]}"#,
        )
        .unwrap();
        let mut ticks = Vec::new();
        run(&s, |t| {
            let over = t.slaves["a"].overloaded;
            let moves: Vec<_> = t
                .moves
                .iter()
                .map(|m| (m.client.clone(), m.to.clone(), m.rate_mbps, m.reason))
                .collect();
            ticks.push((over, moves, t.placement.clone()));
        });
        assert!(!ticks[0].0 && ticks[1].0, "{:?}", ticks);
        assert!(ticks[0].1.is_empty());
        let moved = &ticks[1].1;
        assert_eq!(moved.len(), 1, "{moved:?}");
        let (client, to, rate, reason) = &moved[0];
        assert_eq!(
            (to.as_str(), *reason),
            ("b", crate::policy::Reason::Overload)
        );
        // The client lands where its update frame told it, the tick after.
        let c = if client == "c1" { 0 } else { 1 };
        assert_eq!((ticks[1].2[c], ticks[2].2[c]), (0, 1));
        assert!(*rate == 600.0 || *rate == 500.0, "{rate}");
    }
}
