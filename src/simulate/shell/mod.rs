//! The daemon's shell, simulated: the scenario's slaves and clients as a LAN of the month's model
//! (`lan`: ports, each client's neighbour cache, the server kernel's table), handed to the
//! daemon's own [`Engine`] through its door. The engine decides (the detector, the hold-down,
//! the ceiling it learns, the planner, confirm-before-send and the limits); this shell only
//! tells it what the LAN did (dumps, counters, carrier changes, the clients' ARP) and carries
//! out what it asks: counters read, ratios set, update frames sent on the wire, where each
//! client's cache takes them or not, as Linux's does.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use crate::capture::ebpf::{Delta, EntryKey};
use crate::client::ClientKey;
use crate::config::{CaptureConfig, Settings, Target};
use crate::engine::{Engine, Input, Output, PortId, Topic, EVAL_DELAY_MS};
use crate::logging::MessageId;
use crate::policy::Reason;
use crate::Mac;

use super::lan::clients::{Client, SERVER};
use super::lan::ports::Port;
use super::lan::{ToEngine, World as Lan};
use super::{MoveOut, Scenario};

mod guests;

/// The engine's clock at the start of tick 0, ms: it started a second earlier.
pub(super) const START: u64 = 1000;

/// What the engine made of one second.
pub struct Decided {
    /// Its moves, as its log records tell them.
    pub moves: Vec<MoveOut>,
    /// Each slave's detector holds it overloaded.
    pub overloaded: Vec<bool>,
    /// What each guest got, Mbit/s.
    pub guests_got: Vec<f64>,
}

pub struct Shell {
    engine: Engine,
    now: u64,
    /// The simulated LAN: the ports with their counters, the clients' caches, the server's
    /// neighbour table.
    lan: Lan,
    by_ip: HashMap<IpAddr, usize>,
    /// The scenario's names of the clients, for the output.
    labels: Vec<String>,
    /// Each slave's sampling ratio, as the engine set it.
    pub one_in: Vec<u32>,
    /// The moves logged since the last second.
    moves: Vec<MoveOut>,
    /// Clients in the order the engine moved them since the last call of `landed`.
    moved: Vec<usize>,
    /// Each client's rate as last counted, Mbit/s: what the engine's table holds of it.
    counted: Vec<f64>,
    /// The guests' names by key, where each was pinned before its last pin, and what each
    /// received last second (Mbit/s).
    guests: guests::GuestBook,
    /// The engine's log records at this level and above, as lines for the operator.
    log: log::LevelFilter,
    log_lines: Vec<String>,
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
        guests: crate::guests::GuestsConfig {
            enabled: !s.guests.is_empty(),
            ..Default::default()
        },
        ..Settings::for_target(if s.bond {
            Target::Bond("bond0".into())
        } else {
            Target::Ports(names)
        })
    }
}

impl Shell {
    pub fn new(s: &Scenario, log: log::LevelFilter) -> Shell {
        let packet_bytes = s
            .sampling
            .as_ref()
            .map_or(1500.0, |k| k.packet_bytes.max(1.0));
        let ports: Vec<Port> = s
            .slaves
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mac = Mac(2, 0, 0, 1, (i >> 8) as u8, i as u8);
                let mut port = Port::made(p.name.clone(), 2 + i as u32, mac);
                port.capacity_mbps = p.capacity_mbps;
                port.packet_bytes = packet_bytes;
                port
            })
            .collect();
        let first = u32::from(Ipv4Addr::new(198, 18, 1, 10));
        let clients: Vec<Client> = s
            .clients
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let on = s.slaves.iter().position(|sl| sl.name == c.slave);
                let port_mac = ports[on.expect("parse checked the slave")].mac;
                let mac = Mac(2, 0, 0, 2, (i >> 8) as u8, i as u8);
                Client::placed(mac, Ipv4Addr::from(first + i as u32), port_mac, 0)
            })
            .collect();
        let net = format!("{SERVER}/16").parse().expect("a network");
        let mut lan = Lan::scripted(s.elastic.seed, ports, clients, vec![net], s.bond);
        let guests = guests::GuestBook::new(s, &mut lan);
        let mut sh = Shell {
            engine: Engine::new(settings(s), 0),
            now: 0,
            by_ip: lan
                .clients
                .iter()
                .enumerate()
                .map(|(i, c)| (IpAddr::V4(c.ip), i))
                .collect(),
            labels: s.clients.iter().map(|c| c.ip.clone()).collect(),
            one_in: vec![1; s.slaves.len()],
            moves: Vec::new(),
            moved: Vec::new(),
            counted: vec![0.0; s.clients.len()],
            guests,
            log,
            log_lines: Vec::new(),
            lan,
        };
        let dump = sh.lan.dump();
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

    /// What the LAN said since it was last asked (netlink, frames seen), handed in.
    fn hand_in(&mut self) {
        for item in std::mem::take(&mut self.lan.to_engine) {
            match item {
                ToEngine::Netlink(ev) => self.input(Input::Netlink(&ev)),
                ToEngine::Frame(bytes, outgoing, vlan) => {
                    // The LAN's own frames are well formed: one that is not is nobody's input.
                    if let Some(frame) = crate::capture::parse(&bytes) {
                        self.input(Input::Frame {
                            frame: &frame,
                            outgoing,
                            vlan,
                        });
                    }
                }
            }
        }
    }

    /// Hands one input in and carries out everything it leads to.
    fn input(&mut self, input: Input) {
        self.engine.handle(self.now, input);
        while let Some(out) = self.engine.poll_output() {
            self.carry_out(out);
        }
    }

    fn slave(&self, name: &str) -> Option<usize> {
        self.lan.ports.iter().position(|p| p.name == name)
    }

    fn carry_out(&mut self, out: Output) {
        let now = self.now;
        if let Output::Log { level, text, .. } = &out {
            if *level <= self.log {
                // The scenario's time: tick t is [t, t + 1).
                let t = (now as f64 - START as f64) / 1000.0;
                self.log_lines.push(format!("t={t:.3} {level:<5} {text}"));
            }
        }
        match out {
            Output::Send { port, tag, frame } => {
                // The frame leaves by its port if that one is up; on the wire, the client it
                // is for hears it and its cache takes it or not.
                let p = self.slave(&port.name);
                let up = p.is_some_and(|p| self.lan.ports[p].live());
                let result = if up {
                    self.lan.deliver(now, &frame);
                    Ok(())
                } else {
                    Err(Some(libc::ENETDOWN))
                };
                self.guest_announced(&tag, p.filter(|_| up));
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
                if let Some(p) = self.lan.ports.iter().position(|p| p.ifindex == ifindex) {
                    let ev = [self.lan.port_link(p)];
                    self.engine.handle(now, Input::Netlink(&ev));
                }
            }
            Output::Redump => {
                let dump = self.lan.dump();
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
            Output::Log { fields, .. } if fields.id == Some(MessageId::GuestMove) => {
                self.record_guest_move(&fields)
            }
            out @ (Output::GuestPath { .. }
            | Output::GuestPort { .. }
            | Output::PinGuest { .. }
            | Output::UnpinGuest { .. }) => self.guest_output(out),
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
        self.moves.push(out);
        self.moved.push(c);
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
        if self.lan.ports[p].up == up {
            return;
        }
        self.deadlines(START + t * 1000);
        self.lan.set_carrier(self.now, p, up);
        self.hand_in();
        // On a bond the driver follows: the bond's MAC moves if the active slave fell, and it
        // tells the clients it dealt anew.
        self.lan.reselect_active(self.now);
        self.lan.rlb_round(self.now);
        self.hand_in();
    }

    /// Tick `t` ended: each slave received `rx` Mbit/s for the clients, each client wanted
    /// `demand` and got `rate`, and was counted at `counted` Mbit/s on slave `on` (none: not
    /// counted); each guest's traffic reached the slaves as `guests` says (guest, slave,
    /// Mbit/s). The guests' counts and the engine's second, its evaluation `EVAL_DELAY_MS`
    /// after, then the guests transmit and the clients' caches are a second older (their
    /// timers, their questions, the server's answers).
    pub fn second(
        &mut self,
        t: u64,
        rx: &[f64],
        flows: Flows,
        guests: &[(usize, usize, f64)],
    ) -> Decided {
        let end = START + (t + 1) * 1000;
        self.deadlines(end.saturating_sub(1));
        self.now = end;
        for (p, mbps) in rx.iter().enumerate() {
            self.lan.ports[p].rx_bytes += (mbps * 1e6 / 8.0).round() as u64;
        }
        // The guests' counts go in before the clients', as the daemon hands them.
        let guests_got = self.guests_second(guests);
        let counts = self.counts(flows.on, flows.counted);
        self.counted.copy_from_slice(flows.counted);
        self.input(Input::Second {
            counts: &counts,
            ports: &[],
        });
        self.deadlines(end + EVAL_DELAY_MS);
        let overloaded = self
            .lan
            .ports
            .iter()
            .map(|sp| {
                let list = &self.engine.ports().list;
                list.iter()
                    .find(|p| p.name == sp.name)
                    .is_some_and(|p| p.detector.overloaded())
            })
            .collect();
        for (c, cl) in self.lan.clients.iter_mut().enumerate() {
            cl.demand_bps = flows.demand[c] * 1e6;
            cl.delivered_bps = flows.rate[c] * 1e6;
        }
        self.lan.guests_transmit(self.now);
        self.lan.tick_clients(self.now);
        self.hand_in();
        Decided {
            moves: std::mem::take(&mut self.moves),
            overloaded,
            guests_got,
        }
    }

    /// The second's counts, as the kernel's counting hands them over.
    fn counts(&self, on: &[Option<usize>], counted: &[f64]) -> Vec<(PortId, Delta)> {
        let engine_port = |p: usize| {
            let name = &self.lan.ports[p].name;
            self.engine
                .ports()
                .list
                .iter()
                .position(|x| &x.name == name)
        };
        let packet_bytes = |p: usize| self.lan.ports[p].packet_bytes;
        let mut counts = Vec::new();
        for (c, (&p, &mbps)) in on.iter().zip(counted).enumerate() {
            let bytes = (mbps * 1e6 / 8.0).round() as u64;
            let Some((p, ep)) = p.and_then(|p| Some((p, engine_port(p)?))) else {
                continue;
            };
            if bytes == 0 {
                continue;
            }
            let cl = &self.lan.clients[c];
            counts.push((
                PortId::new(ep),
                Delta {
                    key: EntryKey {
                        client: ClientKey::untagged(cl.mac),
                        dst: IpAddr::V4(SERVER),
                    },
                    frames: (bytes as f64 / packet_bytes(p)).ceil() as u64,
                    bytes,
                    src: Some(IpAddr::V4(cl.ip)),
                },
            ));
        }
        counts
    }

    /// The log lines since the last call.
    pub fn take_log(&mut self) -> Vec<String> {
        std::mem::take(&mut self.log_lines)
    }

    /// The slave each client sends to now (the MAC its cache holds, if any), and the clients
    /// the engine moved since the last call, in the order it moved them.
    pub fn landed(&mut self) -> (Vec<Option<usize>>, Vec<usize>) {
        let lan = &self.lan;
        let on = lan
            .clients
            .iter()
            .map(|c| {
                c.target()
                    .and_then(|m| lan.ports.iter().position(|p| p.mac == m))
            })
            .collect();
        (on, std::mem::take(&mut self.moved))
    }
}

/// One second of the clients' flows, by client: what each wanted and got (Mbit/s), the slave
/// it was counted on and what was counted.
pub struct Flows<'a> {
    pub demand: &'a [f64],
    pub rate: &'a [f64],
    pub on: &'a [Option<usize>],
    pub counted: &'a [f64],
}

pub(super) fn reason(s: &str) -> Option<Reason> {
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
