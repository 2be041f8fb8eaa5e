//! The engine: every decision rlbd makes, behind one door.
//!
//! In the style of quinn-proto's `Connection` and ntpd-rs's protocol crate: the shell
//! (`crate::daemon`) owns the sockets and the clock, hands each thing that happened to
//! [`Engine::handle`] as a plain-data [`Input`] with the time, takes the [`Output`]s out with
//! [`Engine::poll_output`] and sleeps until [`Engine::next_deadline`]. The engine keeps the host
//! view, the ports and their detectors, the client table, the steering core (moves, hold-downs,
//! re-assertions, failover, rate limits), the retries of refused frames with their backoff, the
//! explanations of moves not made, and when learning frames go out. It reads no clock, opens no
//! socket and logs nothing itself: a log line is an output like a frame.
//!
//! Times are milliseconds on the shell's monotonic clock (since the daemon started).

mod frames;
mod netlink;
mod persist;
mod reload;
mod report;
pub mod retry;
mod second;
mod sending;

use std::collections::VecDeque;
use std::net::IpAddr;

use log::Level;

use crate::capture::ebpf::Delta;
use crate::capture::{ClientTable, Frame};
use crate::client::ClientKey;
use crate::config::{Settings, Target};
use crate::host::{HostView, PortTable};
use crate::netlink::NlEvent;
use crate::status::StatusReport;
use crate::steer::{Action, ClientSnap, Ctx, PortInfo, Rule, RulesOff, Steerer};
pub use persist::{Persisted, PersistedMove, STATE_VERSION};
pub use report::CaptureFacts;
use retry::Trouble;
pub use sending::SendTag;

/// Time between the second's counters being asked for and their use: a dump answers in well
/// under this.
pub const EVAL_DELAY_MS: u64 = 200;

/// Something that happened, as the shell saw it.
#[derive(Debug)]
pub enum Input<'a> {
    /// Netlink messages read in one batch (links with their counters, addresses, neighbours,
    /// the kernel's word that it dropped some).
    Netlink(&'a [NlEvent]),
    /// A port's capture socket was opened (or could not be) after [`Output::OpenCapture`]: the
    /// link's speed, Mbit/s, as the kernel reports it (`None`: none reported).
    CaptureOpened {
        port: usize,
        speed_mbps: Option<u64>,
        error: Option<String>,
    },
    /// One IPv4/IPv6 frame a capture ring counted for a client, `bytes` long (scaled by the
    /// sampling ratio).
    Counted {
        port: u16,
        key: ClientKey,
        src: IpAddr,
        dst: IpAddr,
        bytes: u64,
    },
    /// A second ended: what the kernel counted per client in it (port, counts), whether every
    /// counting map was read whole, and whether a capture ring that counts dropped frames.
    Second {
        counts: &'a [(usize, Delta)],
        whole: bool,
        ring_drops: bool,
    },
    /// An ARP or Neighbor Discovery frame seen on a port, leaving (`outgoing`) or arriving.
    Frame {
        frame: &'a Frame,
        outgoing: bool,
        vlan: u16,
    },
    /// What became of an [`Output::Send`]: `Ok`, or the errno the kernel refused it with
    /// (`None`: the port has no socket). The frame comes back for a retry.
    SendResult {
        tag: SendTag,
        frame: Vec<u8>,
        result: Result<(), Option<i32>>,
    },
    /// A deadline the engine asked for ([`Engine::next_deadline`]) has passed.
    Deadline,
    /// New settings (SIGHUP or the control socket's reload); the bond or ports are kept.
    Reload(Box<Settings>),
    /// The state an earlier daemon left in `file` (a restart): its moves re-asserted, their
    /// hold-downs kept.
    Restore { state: Box<Persisted>, file: String },
    /// The status, for the control socket (`top`: the busiest clients only; `Some(0)`: no
    /// client list, as the metrics want it).
    StatusQuery { top: Option<usize> },
}

/// What the engine asks the shell to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Send `frame` out of `port`, and report what became of it with the same tag
    /// ([`Input::SendResult`]).
    Send {
        port: usize,
        tag: SendTag,
        frame: Vec<u8>,
    },
    /// A log record.
    Log {
        level: Level,
        topic: Topic,
        text: String,
    },
    /// Open port `port`'s capture socket (a port appeared); answer with
    /// [`Input::CaptureOpened`].
    OpenCapture { port: usize },
    /// Close port `port`'s capture socket (the port is gone).
    CloseCapture { port: usize },
    /// The set of ports or their MACs changed: re-filter every capture.
    Refilter,
    /// The MACs of the server's interfaces on the bond (a macvlan's, a bridge's own), for the
    /// captures: frames to them are the server's load too.
    HostMacs(Vec<crate::Mac>),
    /// Ask the kernel for port `ifindex`'s counters (answered as a netlink link message).
    RequestCounters { ifindex: u32 },
    /// The kernel dropped notifications: dump links, addresses and neighbours again.
    Redump,
    /// A one-line summary for the service manager (`STATUS=`).
    Summary(String),
    /// The status report asked for ([`Input::StatusQuery`]), without the capture sockets'
    /// figures (the shell fills those in: [`CaptureFacts`]).
    Status(Box<StatusReport>),
    /// The durable state changed: write it to the state file (at most once a second).
    Persist(Box<Persisted>),
}

/// What a log record is about, so the shell (and tests) can tell records apart without reading
/// their words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    /// A client moved (or, dry run, would be).
    Move,
    /// An overloaded port nothing was moved off, and why.
    NoMove,
    /// A port appeared, went, changed state or MAC.
    Port,
    /// A frame the kernel refused.
    Send,
    /// Another host claims one of the server's addresses.
    ForeignClaim,
    /// The configuration (reload).
    Config,
    /// The kernel's view (netlink) or the capture path.
    Host,
    /// The state file of an earlier daemon.
    Restore,
    /// Everything else the steering core says.
    Steer,
}

/// The engine's schedule: when the second's evaluation and the next learning frames are due.
#[derive(Debug, Clone, Copy, Default)]
struct Schedule {
    /// Seconds since start (the client table's tick).
    tick: u64,
    eval_at: Option<u64>,
    next_learning: u64,
    next_persist: u64,
}

/// The state machine: see the module's documentation.
pub struct Engine {
    settings: Settings,
    host: HostView,
    ports: PortTable,
    table: ClientTable,
    steer: Steerer,
    trouble: Trouble,
    schedule: Schedule,
    out: VecDeque<Output>,
    /// The steering core's actions, turned into outputs after each call into it (reused).
    actions: Vec<Action>,
    /// The server's addresses, sorted (copied from the host view on change: asked per frame).
    ours: Vec<IpAddr>,
    /// Interfaces on the bond already reported as not steerable.
    unsupported_seen: Vec<String>,
    /// The durable state changed since it was last handed out.
    dirty: bool,
    /// Netlink overruns seen (each answered with a re-dump).
    resyncs: u64,
    /// The clients as the steering core wants them, rebuilt each second (reused).
    snaps: Vec<ClientSnap>,
    /// When the engine was made (the status's uptime).
    started_ms: u64,
    /// Rules switched off (only by the simulation's mutation runs).
    rules_off: RulesOff,
    /// The steering core's view of the ports ([`Engine::refresh_infos`]).
    infos: Vec<PortInfo>,
}

impl Engine {
    /// An engine for `settings` (whose target is set), started at `now`.
    pub fn new(settings: Settings, now: u64) -> Engine {
        let target = settings
            .target
            .clone()
            .unwrap_or_else(|| Target::Ports(Vec::new()));
        let capacity = settings
            .capacity_mbps
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let ports = PortTable::new(
            target.clone(),
            capacity,
            settings.policy.window,
            settings.policy.hits,
        );
        Engine {
            host: HostView::new(target),
            ports,
            table: ClientTable::new(
                settings.capture.table_size,
                settings.capture.idle_timeout_secs,
            ),
            steer: Steerer::new(steer_config(&settings)),
            trouble: Trouble::default(),
            schedule: Schedule::default(),
            out: VecDeque::new(),
            actions: Vec::new(),
            ours: Vec::new(),
            unsupported_seen: Vec::new(),
            dirty: false,
            resyncs: 0,
            snaps: Vec::new(),
            started_ms: now,
            rules_off: RulesOff::default(),
            infos: Vec::new(),
            settings,
        }
    }

    /// The one way in.
    pub fn handle(&mut self, now: u64, input: Input) {
        match input {
            Input::Netlink(events) => self.on_netlink(now, events),
            Input::CaptureOpened {
                port,
                speed_mbps,
                error,
            } => self.on_capture_opened(port, speed_mbps, error),
            Input::Counted {
                port,
                key,
                src,
                dst,
                bytes,
            } => {
                let ours = &self.ours;
                let tick = self.schedule.tick;
                self.table.account(key, src, dst, port, bytes, tick, |ip| {
                    ours.binary_search(&ip).is_ok()
                });
            }
            Input::Second {
                counts,
                whole,
                ring_drops,
            } => self.on_second(now, counts, whole, ring_drops),
            Input::Frame {
                frame,
                outgoing,
                vlan,
            } => self.on_frame(now, frame, outgoing, vlan),
            Input::SendResult { tag, frame, result } => {
                self.on_send_result(now, tag, frame, result)
            }
            Input::Deadline => self.on_deadline(now),
            Input::Reload(settings) => self.reload(now, *settings),
            Input::Restore { state, file } => self.restore(now, *state, &file),
            Input::StatusQuery { top } => {
                let r = self.status(now, top);
                self.out.push_back(Output::Status(Box::new(r)));
            }
        }
        self.maybe_persist(now);
    }

    /// The one way out: the next thing to do, in order.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// When the engine next wants [`Input::Deadline`], if it wants it at all (the shell also
    /// hands in [`Input::Second`] once a second).
    pub fn next_deadline(&self) -> Option<u64> {
        let s = &self.schedule;
        [
            s.eval_at,
            self.steer.next_due(),
            self.trouble.retries.next_due(),
            self.learning().then_some(s.next_learning),
            self.dirty.then_some(s.next_persist),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The ports as the engine keeps them, for the shell's capture sockets (names, indices,
    /// MACs): read-only.
    pub fn ports(&self) -> &PortTable {
        &self.ports
    }

    /// The server's addresses, sorted (the capture path's "is this frame the server's?").
    pub fn our_addresses(&self) -> &[IpAddr] {
        &self.ours
    }

    /// The seconds counted so far (the client table's tick).
    pub fn tick(&self) -> u64 {
        self.schedule.tick
    }

    /// Switches `rule` off: only to prove that a test (the simulation) catches its absence.
    /// The daemon never calls this.
    pub fn switch_off(&mut self, rule: Rule) {
        self.rules_off = self.rules_off.with(rule);
        self.steer.reconfigure(self.steer_config());
    }

    /// The steering core's settings: the daemon's, and the rules switched off.
    fn steer_config(&self) -> crate::steer::SteerConfig {
        crate::steer::SteerConfig {
            rules_off: self.rules_off,
            ..steer_config(&self.settings)
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    fn learning(&self) -> bool {
        matches!(self.ports.target, Target::Ports(_))
    }

    fn on_deadline(&mut self, now: u64) {
        if let Some(due) = self.steer.next_due().filter(|d| *d <= now) {
            self.trouble.timer_ran(due, now);
        }
        if self.schedule.eval_at.is_some_and(|t| now >= t) {
            self.schedule.eval_at = None;
            self.evaluate(now);
        }
        if self.learning() && now >= self.schedule.next_learning {
            self.send_learning_frames();
            self.schedule.next_learning =
                now + self.settings.steering.learning_interval_secs * 1000;
        }
        self.steer_with(now, |s, now, ctx, out| s.on_timer(now, ctx, out));
        self.retry_sends(now);
    }

    /// Runs `f` on the steering core with its view of the host and the ports, then turns what it
    /// decided into outputs.
    fn steer_with<R>(
        &mut self,
        now: u64,
        f: impl FnOnce(&mut Steerer, u64, &Ctx, &mut Vec<Action>) -> R,
    ) -> R {
        let ctx = Ctx {
            host: &self.host,
            ports: &self.infos,
        };
        let r = f(&mut self.steer, now, &ctx, &mut self.actions);
        self.carry_out(now);
        r
    }

    /// The steering core's view of the ports, rebuilt when a port changes (not per call).
    fn refresh_infos(&mut self) {
        self.infos.clear();
        self.infos.extend(self.ports.list.iter().map(|p| PortInfo {
            name: p.name.clone(),
            mac: p.mac,
            usable: p.usable(),
        }));
    }

    fn log(&mut self, level: Level, topic: Topic, text: String) {
        self.out.push_back(Output::Log { level, topic, text });
    }
}

/// The steering core's settings, from the daemon's.
pub fn steer_config(s: &Settings) -> crate::steer::SteerConfig {
    crate::steer::SteerConfig {
        policy: s.policy.clone(),
        repeats: s.steering.repeats,
        repeat_interval_ms: s.steering.repeat_interval_ms,
        reassert_delay_ms: s.steering.reassert_delay_ms,
        per_client_per_sec: s.steering.per_client_per_sec,
        total_per_sec: s.steering.total_per_sec,
        idle_ms: s.capture.idle_timeout_secs.saturating_mul(1000),
        dry_run: s.dry_run,
        max_moved: s.capture.table_size,
        // A bond's driver keeps the clients it answered itself (balance-alb re-steers them off
        // a failed slave; balance-tlb answers with a MAC that moves with the active slave).
        follow_answers: matches!(s.target, Some(Target::Ports(_))),
        rules_off: RulesOff::default(),
    }
}

#[cfg(test)]
mod tests;
