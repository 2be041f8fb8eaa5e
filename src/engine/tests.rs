//! The engine through its door: a bond of three 10 Mbit/s slaves, clients counted on them, the
//! outputs carried out as the shell would; and a restart with and without the state file.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use super::*;
use crate::capture::ebpf::map::{Delta, EntryKey};
use crate::client::ClientKey;
use crate::host::testing::{addr, link, neigh, BOND};
use crate::netlink::LinkInfo;
use crate::policy::PolicyConfig;
use crate::Mac;

const SLAVES: [u32; 3] = [21, 22, 23];
const START: u64 = 5_000_000;

fn settings() -> Settings {
    let capacity_mbps: BTreeMap<String, f64> =
        ["sl0", "sl1", "sl2"].map(|n| (n.to_string(), 10.0)).into();
    Settings {
        capacity_mbps,
        ..Settings::for_target(Target::Bond("bond0".into()))
    }
}

fn client(n: u8) -> (Mac, Ipv4Addr) {
    (Mac(2, 0, 0, 0, 9, n), Ipv4Addr::new(198, 18, 0, 100 + n))
}

fn slave(i: usize, rx: u64) -> NlEvent {
    let NlEvent::Link(l) = link(SLAVES[i], &format!("sl{i}"), None) else {
        unreachable!()
    };
    NlEvent::Link(LinkInfo {
        master: Some(BOND),
        rx_bytes: Some(rx),
        ..l
    })
}

/// The engine with the shell's part played: every output carried out at once.
struct Rig {
    e: Engine,
    now: u64,
    rx: [u64; 3],
    sends: Vec<(usize, SendTag)>,
    logs: Vec<(Topic, String)>,
    /// Each log record's fields, beside `logs`.
    fields: Vec<crate::logging::Fields>,
    summaries: Vec<String>,
    persisted: Option<Persisted>,
    /// Where each client sends: where it started, then where the last update told it.
    at: std::collections::HashMap<u8, usize>,
    /// The kernel refuses the next first try of an update (ENOBUFS), once; and, with
    /// `fail_refused`, the refused client's neighbour entry fails right after.
    refuse_next: bool,
    fail_refused: bool,
    /// With the refusal, the port's MAC changes right after (balance-alb's swap).
    swap_refused: bool,
    /// The hooks the kernel refuses the counting program at (none: tc takes it).
    refuse_hooks: Vec<CountingHook>,
    /// What the shell reports of each port at the end of the next second.
    facts: Vec<PortSecond>,
    /// Every other output, in order (hooks asked for, ratios set, guest ports, reload
    /// answers).
    others: Vec<Output>,
}

impl Rig {
    /// The bond, its slaves, the server's address, and clients 1-4 confirmed (5: not).
    fn new() -> Rig {
        Rig::with(settings(), &[])
    }

    /// The same with `settings`, the kernel refusing the counting program at `refuse`.
    fn with(settings: Settings, refuse: &[CountingHook]) -> Rig {
        let mut events = vec![link(BOND, "bond0", Some("bond"))];
        events.extend((0..3).map(|i| slave(i, 0)));
        events.push(addr(BOND, "198.18.0.1/24"));
        for n in 1..=4 {
            let (mac, ip) = client(n);
            events.push(neigh(BOND, ip.into(), mac, libc::NUD_REACHABLE));
        }
        let mut r = Rig {
            e: Engine::new(settings, START),
            now: START,
            rx: [0; 3],
            sends: Vec::new(),
            logs: Vec::new(),
            fields: Vec::new(),
            summaries: Vec::new(),
            persisted: None,
            at: Default::default(),
            refuse_next: false,
            fail_refused: false,
            swap_refused: false,
            refuse_hooks: refuse.to_vec(),
            facts: Vec::new(),
            others: Vec::new(),
        };
        r.e.handle(r.now, Input::Netlink(&events));
        r.drain();
        r
    }

    fn drain(&mut self) {
        while let Some(o) = self.e.poll_output() {
            match o {
                Output::Send { port, tag, frame } => {
                    let port = port.id.index();
                    self.sends.push((port, tag));
                    let refuse = matches!(tag, SendTag::Update { tries: 1, .. })
                        && std::mem::take(&mut self.refuse_next);
                    if let (SendTag::Update { client, .. }, false) = (tag, refuse) {
                        self.at.insert(client.mac.5, port);
                    }
                    let result = if refuse {
                        Err(Some(libc::ENOBUFS))
                    } else {
                        Ok(())
                    };
                    let input = Input::SendResult { tag, frame, result };
                    self.e.handle(self.now, input);
                    if let (SendTag::Update { client: c, .. }, true) = (tag, refuse) {
                        if self.fail_refused {
                            let ip = client(c.mac.5).1;
                            let ev = [neigh(BOND, ip.into(), c.mac, libc::NUD_FAILED)];
                            self.e.handle(self.now, Input::Netlink(&ev));
                        }
                        if self.swap_refused {
                            let NlEvent::Link(l) = slave(port, self.rx[port]) else {
                                unreachable!()
                            };
                            let mac = Some(Mac(2, 0, 0, 0, 0x77, port as u8));
                            let ev = [NlEvent::Link(LinkInfo { mac, ..l })];
                            self.e.handle(self.now, Input::Netlink(&ev));
                        }
                    }
                }
                Output::OpenCapture { port } => {
                    let input = Input::CaptureOpened {
                        port: port.id,
                        speed_mbps: Some(1000),
                        error: None,
                    };
                    self.e.handle(self.now, input);
                }
                Output::AttachHook { port, hook } => {
                    self.others.push(Output::AttachHook {
                        port: port.clone(),
                        hook,
                    });
                    let result = if self.refuse_hooks.contains(&hook) {
                        Err(format!("{}: {} refused", port.name, hook.as_str()))
                    } else {
                        Ok(HookFacts {
                            store: "slots",
                            tc_attach: (hook == CountingHook::Tc).then_some("tcx"),
                            store_fallback: None,
                        })
                    };
                    let input = Input::HookAttached {
                        port: port.id,
                        hook,
                        result,
                    };
                    self.e.handle(self.now, input);
                }
                Output::RequestCounters { ifindex } => {
                    let i = SLAVES.iter().position(|s| *s == ifindex).unwrap();
                    let ev = [slave(i, self.rx[i])];
                    self.e.handle(self.now, Input::Netlink(&ev));
                }
                Output::Log {
                    topic,
                    text,
                    fields,
                    ..
                } => {
                    self.logs.push((topic, text));
                    self.fields.push(fields);
                }
                Output::Persist(p) => self.persisted = Some(*p),
                Output::Summary(s) => self.summaries.push(s),
                o => self.others.push(o),
            }
        }
    }

    /// One second in which each (client, starting slave, Mbit/s) sends, on the slave the last
    /// update told it (or the starting one).
    fn second(&mut self, load: &[(u8, usize, f64)]) {
        for &(n, start, mbps) in load {
            let port = *self.at.entry(n).or_insert(start);
            let (mac, ip) = client(n);
            let bytes = (mbps * 1e6 / 8.0) as u64;
            self.rx[port] += bytes;
            let input = Input::Counted {
                port: PortId::new(port),
                key: ClientKey::untagged(mac),
                src: IpAddr::V4(ip),
                dst: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
                bytes,
                for_host: true,
                dst_mac: Mac(2, 0, 0, 0, 0, port as u8),
            };
            self.e.handle(self.now, input);
        }
        self.deadlines(1000);
        let facts = std::mem::take(&mut self.facts);
        let second = Input::Second {
            counts: &[],
            ports: &facts,
        };
        self.e.handle(self.now, second);
        self.drain();
    }

    /// The engine's deadlines over the next `ms`, each handled and its output drained; the
    /// clock ends `ms` later.
    /// Port `port` loses its link (its counters as they stand), handed in and drained.
    fn port_down(&mut self, port: usize) {
        let NlEvent::Link(l) = slave(port, self.rx[port]) else {
            unreachable!()
        };
        let ev = [NlEvent::Link(LinkInfo {
            oper_up: false,
            ..l
        })];
        self.e.handle(self.now, Input::Netlink(&ev));
        self.drain();
    }

    fn deadlines(&mut self, ms: u64) {
        let end = self.now + ms;
        while let Some(d) = self.e.next_deadline().filter(|d| *d < end) {
            self.now = d.max(self.now);
            self.e.handle(self.now, Input::Deadline);
            self.drain();
        }
        self.now = end;
    }

    /// Overload moves made so far, as (client MAC, target slave).
    fn moves_of(&self, n: u8) -> Vec<usize> {
        let (mac, _) = client(n);
        self.sends
            .iter()
            .filter_map(|(p, t)| match t {
                SendTag::Update { client, .. } if client.mac == mac => Some(*p),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn an_overloaded_slave_sheds_a_client_and_the_move_is_handed_out_to_persist() {
    let mut r = Rig::new();
    for _ in 0..6 {
        r.second(&[(1, 0, 6.0), (2, 0, 6.0)]);
    }
    let moved: Vec<u8> = (1..=2).filter(|n| !r.moves_of(*n).is_empty()).collect();
    assert_eq!(moved.len(), 1, "one of the two moved: {:?}", r.logs);
    let i = r
        .logs
        .iter()
        .position(|(t, s)| *t == Topic::Move && s.starts_with("move "))
        .expect("the move's line");
    // The journal's fields: the same facts as the line, as data.
    let (mac, ip) = client(moved[0]);
    let f = &r.fields[i];
    assert_eq!(f.id, Some(crate::logging::MessageId::Move));
    assert_eq!(f.reason, Some("overload"));
    assert_eq!(f.from_port.as_deref(), Some("sl0"));
    let to = r.logs[i].1.split(" -> ").nth(1).unwrap().split(':').next();
    assert_eq!(f.port.as_deref(), to, "{:?}", r.logs[i]);
    assert_ne!(f.port.as_deref(), Some("sl0"));
    assert_eq!((f.client, f.client_mac), (Some(IpAddr::V4(ip)), Some(mac)));
    assert!(!f.dry_run);
    let p = r.persisted.as_ref().expect("the move was persisted");
    assert_eq!(p.moves.len(), 1);
    assert_eq!(p.target, "bond bond0");
}

#[test]
fn a_restart_with_the_state_file_reasserts_and_keeps_the_hold_down() {
    let mut r = Rig::new();
    for _ in 0..6 {
        r.second(&[(1, 0, 6.0), (2, 0, 6.0)]);
    }
    let state = r.persisted.clone().expect("persisted");
    let (moved, to) = if r.moves_of(2).is_empty() {
        (1, r.moves_of(1)[0])
    } else {
        (2, r.moves_of(2)[0])
    };
    let mut again = Rig::new();
    again.now = r.now + 2000;
    let input = Input::Restore {
        state: Box::new(state),
        file: "test.state".into(),
    };
    again.e.handle(again.now, input);
    again.drain();
    assert!(
        again.sends.is_empty(),
        "the update budgets start spent (the daemon before may have used them): {:?}",
        again.sends
    );
    again.deadlines(1000);
    assert!(
        again.moves_of(moved).iter().all(|p| *p == to) && !again.moves_of(moved).is_empty(),
        "re-asserted on the same slave within a second: {:?}",
        again.sends
    );
    // Quiet seconds until the move's settling window (`settle`) is over: within it a move
    // that overfilled its port may be corrected once (issue 27), which is not this test's
    // business; the hold-down (30 s) still holds after it.
    let quiet = |n: u8| [(3 - n, 0, 1.0), (n, to, 1.0), (5, to, 1.0)];
    for _ in 0..=PolicyConfig::default().settle {
        again.second(&quiet(moved));
    }
    // The moved client now shares a slave with one that cannot be moved: only it could go,
    // and it is held.
    again.sends.clear();
    let load = |n: u8| [(3 - n, 0, 1.0), (n, to, 6.0), (5, to, 6.0)];
    for _ in 0..8 {
        again.second(&load(moved));
    }
    assert!(
        again.moves_of(moved).iter().all(|p| *p == to),
        "no move of a held client: {:?}",
        again.logs
    );
    // Without the state file the same second moves it: the test bites.
    let mut fresh = Rig::new();
    fresh.now = again.now;
    for _ in 0..8 {
        fresh.second(&load(moved));
    }
    assert!(
        fresh.moves_of(moved).iter().any(|p| *p != to),
        "a fresh engine moves it: {:?}",
        fresh.logs
    );
}

#[test]
fn a_state_file_of_another_bond_or_too_old_is_ignored_with_a_warning() {
    let mut r = Rig::new();
    for _ in 0..6 {
        r.second(&[(1, 0, 6.0), (2, 0, 6.0)]);
    }
    let state = r.persisted.clone().expect("persisted");
    for (what, mut s, at) in [
        ("not of bond0", state.clone(), r.now + 1000),
        ("older than the hold-down", state.clone(), r.now + 31_000),
        ("version", state.clone(), r.now + 1000),
    ] {
        if what == "not of bond0" {
            s.target = "bond bond9".into();
        }
        if what == "version" {
            s.version = 99;
        }
        let mut again = Rig::new();
        again.now = at;
        let input = Input::Restore {
            state: Box::new(s),
            file: "test.state".into(),
        };
        again.e.handle(again.now, input);
        again.drain();
        let warned: Vec<&String> = again
            .logs
            .iter()
            .filter(|(t, _)| *t == Topic::Restore)
            .map(|(_, s)| s)
            .collect();
        assert_eq!(warned.len(), 1, "{what}: {warned:?}");
        assert!(warned[0].contains("ignored"), "{what}: {warned:?}");
        assert!(again.sends.is_empty(), "{what}: nothing re-asserted");
    }
}

#[test]
fn the_state_is_rewritten_while_there_are_moves_so_a_restart_finds_it_young() {
    let mut r = Rig::new();
    for _ in 0..6 {
        r.second(&[(1, 0, 6.0), (2, 0, 6.0)]);
    }
    assert!(r.persisted.is_some());
    // A minute of nothing new: the file is still rewritten, a sixth of the hold-down apart.
    for _ in 0..60 {
        r.second(&[(1, 0, 6.0), (2, 1, 6.0)]);
        let age = r.now - r.persisted.as_ref().map_or(0, |p| p.written_ms);
        assert!(age <= 6_000, "written {age} ms ago");
    }
}

#[test]
fn nothing_is_persisted_before_the_first_second_so_a_start_cannot_overwrite_the_file() {
    // A port down in the first view of the host changes durable state (a failover) at once.
    let mut r = Rig::new();
    let ev = [NlEvent::Link(LinkInfo {
        oper_up: false,
        ..match slave(2, 0) {
            NlEvent::Link(l) => l,
            _ => unreachable!(),
        }
    })];
    r.e.handle(r.now, Input::Netlink(&ev));
    r.drain();
    assert!(r.persisted.is_none(), "handed out before the first second");
    r.second(&[]);
    r.second(&[]);
    assert!(r.persisted.is_some(), "handed out once started");
}

#[test]
fn with_the_state_file_off_no_deadline_is_left_that_never_clears() {
    // The simulation's mutation run found it: a dirty flag nobody cleared asked for a deadline
    // in the past forever (the daemon's loop would spin; a dry run takes the same path).
    for dry in [false, true] {
        let mut r = Rig::new();
        if dry {
            let mut s = settings();
            s.dry_run = true;
            let why = "test";
            r.e.handle(
                r.now,
                Input::Reload {
                    settings: Box::new(s),
                    why,
                },
            );
        } else {
            r.e.switch_off(Rule::StateFile);
        }
        r.drain();
        r.second(&[]);
        // A port going down changes durable state at once.
        r.port_down(2);
        r.e.handle(r.now, Input::Deadline);
        r.drain();
        let d = r.e.next_deadline();
        assert!(
            d.is_none_or(|d| d > r.now),
            "dry {dry}: deadline {d:?} at {}",
            r.now
        );
        assert!(r.persisted.is_none());
    }
}

#[test]
fn a_port_going_down_is_in_the_service_status_at_the_next_second() {
    let mut r = Rig::new();
    for _ in 0..12 {
        r.second(&[]);
    }
    let quiet = r.summaries.len();
    r.second(&[]);
    assert_eq!(
        r.summaries.len(),
        quiet,
        "no change, no summary before its 10 s"
    );
    r.port_down(1);
    r.second(&[]);
    let last = r.summaries.last().expect("a summary");
    assert!(r.summaries.len() > quiet, "the change is told at once");
    assert!(last.contains("sl1(down)"), "sl1 is down: {last}");
}

#[test]
fn the_bytes_counted_on_each_port_are_in_its_status_beside_the_kernel_counter() {
    let mut r = Rig::new();
    r.second(&[(1, 0, 2.0), (2, 1, 1.0)]);
    // And one second of the kernel's counts (counting in the kernel) for client 3 on slave 1.
    let (mac, ip) = client(3);
    let key = EntryKey {
        client: ClientKey::untagged(mac),
        dst: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
    };
    let d = Delta {
        key,
        frames: 10,
        bytes: 15_140,
        src: Some(IpAddr::V4(ip)),
    };
    let second = Input::Second {
        counts: &[(PortId::new(1), d)],
        ports: &[],
    };
    r.e.handle(r.now, second);
    r.drain();
    r.e.handle(r.now, Input::StatusQuery { top: None });
    let report = std::iter::from_fn(|| r.e.poll_output())
        .find_map(|o| match o {
            Output::Status(s) => Some(s),
            _ => None,
        })
        .expect("a status report");
    let counted: Vec<u64> = report.ports.iter().map(|p| p.counted_bytes).collect();
    assert_eq!(counted[..2], [250_000, 125_000 + 15_140]);
}

/// `[clients]` through the engine: client 1 pinned to sl2, client 2 excluded; both on an
/// overloaded sl0.
mod clients;
mod facts;
mod lifecycle;
mod links;
