//! The engine: every decision rlbd makes, behind one door.
//!
//! In the style of quinn-proto's `Connection` and ntpd-rs's protocol crate: the shell
//! (`crate::daemon`) owns the sockets and the clock, hands each thing that happened to
//! [`Engine::handle`] as a plain-data [`Input`] with the time, takes the [`Output`]s out with
//! [`Engine::poll_output`] and sleeps until [`Engine::next_deadline`]. The engine keeps the host
//! view, the ports and their detectors, the client table, the steering core (moves, hold-downs,
//! re-assertions, failover, rate limits), the retries of refused frames with their backoff, the
//! explanations of moves not made, when learning frames go out, and how each port counts (its
//! hook, its sampling ratio, whether a second's rates are whole: `counting.rs`). It reads no
//! clock, opens no socket and logs nothing itself: a log line is an output like a frame.
//!
//! Times are milliseconds on the shell's monotonic clock (since the daemon started).

mod capture;
mod counting;
mod frames;
mod guests;
mod io;
mod lan;
mod lifecycle;
mod outbox;
mod persist;
mod reload;
mod report;
pub mod retry;
mod second;
mod sending;

use log::Level;

use crate::capture::ebpf::Delta;
use crate::capture::{ClientTable, Frame};
use crate::config::{ConfigError, Settings, Target};
use crate::guests::{GuestAction, Guests};
use crate::host::PortTable;
use crate::netlink::NlEvent;
use crate::steer::{Action, LogKind, Rule, RulesOff, Steerer};
use frames::Seen;
pub use io::{
    CountingHook, HookFacts, Input, MapRead, Output, PortId, PortRef, PortSecond, SendTag, Topic,
};
use lan::Lan;
use outbox::Outbox;
use persist::Durable;
pub use persist::{Persisted, PersistedMove, STATE_VERSION};
pub use reload::{reload_answer, steer_config};
pub use report::CaptureFacts;
use retry::Trouble;
use sending::{Outcome, Sender};

/// Time between the second's counters being asked for and their use: a dump answers in well
/// under this.
pub const EVAL_DELAY_MS: u64 = 200;

/// The engine's schedule: when the second's evaluation and the next learning frames are due.
#[derive(Debug, Clone, Copy, Default)]
struct Schedule {
    /// Seconds since start (the client table's tick).
    tick: u64,
    eval_at: Option<u64>,
    next_learning: u64,
    /// The ports (which, and whether up) the last summary told of: a change is told at once.
    summary_ports: u64,
}

/// The state machine: see the module's documentation.
pub struct Engine {
    settings: Settings,
    lan: Lan,
    table: ClientTable,
    steer: Steerer,
    sender: Sender,
    trouble: Trouble,
    durable: Durable,
    schedule: Schedule,
    out: Outbox,
    /// The steering core's actions, turned into outputs after each call into it (reused).
    actions: Vec<Action>,
    /// Outcomes of frames for the steering core, handed over after each input (reused).
    outcomes: Vec<Outcome>,
    /// The clients and ports as the steering core wants them, rebuilt each second (reused).
    bufs: second::Buffers,
    /// When the engine was made (the status's uptime).
    started_ms: u64,
    /// Rules switched off (only by the simulation's mutation runs).
    rules_off: RulesOff,
    /// The guests behind the bond, and their table's actions waiting to become outputs.
    guests: Guests,
    guest_actions: Vec<GuestAction>,
    /// Whether the shell was told to balance guests ([`Output::GuestPath`]).
    guest_path: bool,
    /// How each port counts: its hook, its sampling ratio, its map and ring.
    counting: counting::Counting,
}

impl Engine {
    /// An engine for `settings` (whose target is set), started at `now`.
    pub fn new(settings: Settings, now: u64) -> Engine {
        let target = settings
            .target
            .clone()
            .unwrap_or_else(|| Target::Ports(Vec::new()));
        Engine {
            lan: Lan::new(&settings, target),
            table: ClientTable::new(
                settings.capture.table_size,
                settings.capture.idle_timeout_secs,
            ),
            steer: Steerer::new(steer_config(&settings, RulesOff::default())),
            sender: Sender::default(),
            trouble: Trouble::default(),
            durable: Durable::default(),
            schedule: Schedule::default(),
            out: Outbox::default(),
            actions: Vec::new(),
            outcomes: Vec::new(),
            bufs: second::Buffers::default(),
            started_ms: now,
            rules_off: RulesOff::default(),
            guests: Guests::new(settings.guests.clone(), settings.policy.hold_down),
            guest_actions: Vec::new(),
            guest_path: false,
            counting: counting::Counting::new(
                settings.capture.kernel_counting(),
                settings.capture.sampling_limit(),
            ),
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
            } => self.capture_opened(port, speed_mbps, error),
            Input::HookAttached { port, hook, result } => self.hook_attached(port, hook, result),
            Input::Counted {
                port,
                key,
                src,
                dst,
                bytes,
                for_host,
                dst_mac,
            } => {
                if !self.lan.is_host_frame(for_host, dst_mac) {
                    return;
                }
                let port = port.index();
                if let Some(p) = self.lan.ports.list.get_mut(port) {
                    p.counted_bytes += bytes;
                }
                let (lan, tick) = (&self.lan, self.schedule.tick);
                let port = port as u16;
                self.table
                    .account(key, src, dst, port, bytes, tick, |ip| lan.is_ours(ip));
                // The per-frame path: a count decides nothing, sends nothing, persists nothing.
                return;
            }
            Input::Drained { port, frames } => self.drained(now, port, frames),
            Input::Second { counts, ports } => self.on_second(now, counts, ports),
            Input::Frame {
                frame,
                outgoing,
                vlan,
            } => self.on_frame(now, frame, outgoing, vlan),
            Input::SendResult { tag, frame, result } => {
                let o = self
                    .sender
                    .result(now, (tag, frame), result, &self.lan, &mut self.out);
                self.outcomes.extend(o);
            }
            Input::Deadline => self.on_deadline(now),
            Input::Reload { settings, why } => self.reload(*settings, why),
            Input::ReloadFailed { why, error } => self.refuse_reload(why, &error),
            Input::Restore { state, file } => self.restore(now, *state, &file),
            Input::GuestCounts(counts) => self.on_guest_counts(now, counts),
            Input::GuestPathFailed { why } => self.guest_path_failed(why),
            Input::DumpState { captures } => self.dump_state(now, captures),
            Input::Started => self.started(now),
            Input::Stopping { signal } => self.stopping(signal),
            Input::StatusQuery { top } => {
                let r = report::status(self, now, top);
                self.out.push(Output::Status(Box::new(r)));
            }
        }
        self.report_outcomes(now);
        self.maybe_persist(now);
    }

    /// The one way out: the next thing to do, in order.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop()
    }

    /// When the engine next wants [`Input::Deadline`], if it wants it at all (the shell also
    /// hands in [`Input::Second`] once a second).
    pub fn next_deadline(&self) -> Option<u64> {
        let s = &self.schedule;
        [
            s.eval_at,
            self.steer.next_due(),
            self.sender.next_due(),
            self.learning().then_some(s.next_learning),
            self.durable.deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The ports as the engine keeps them, read-only (for `check-config`'s description; the
    /// running shell is told what it needs in its outputs, [`PortRef`]).
    pub fn ports(&self) -> &PortTable {
        &self.lan.ports
    }

    /// The kernel's links, addresses and neighbours as the engine keeps them, read-only (the
    /// simulation compares them with its world after a netlink resync).
    pub fn host(&self) -> &crate::host::HostView {
        &self.lan.host
    }

    /// A present port without a capacity (no configured one, no link speed), by name: at start
    /// a configuration error.
    pub fn port_without_capacity(&self) -> Option<String> {
        let list = &self.lan.ports.list;
        let p = list.iter().find(|p| p.present && p.capacity_bps <= 0.0)?;
        Some(p.name.clone())
    }

    /// Interfaces on the bond that rlbd cannot steer (at start these are a configuration error).
    pub fn unsupported(&self) -> &[(String, String)] {
        self.lan.unsupported()
    }

    /// Why `[guests]` cannot be served on this bond (balance-tlb), if so: at start a
    /// configuration error.
    pub fn guests_refused(&self) -> Option<&str> {
        self.guests.refused()
    }

    /// The server's interfaces on the bond, for the start-up line.
    pub fn shape(&self) -> Vec<String> {
        self.lan.shape()
    }

    /// The settings in force.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Switches `rule` off: only to prove that a test (the simulation) catches its absence.
    /// Behind the `rule-switches` feature, which the shipped binary does not enable.
    #[cfg(any(test, feature = "rule-switches"))]
    pub fn switch_off(&mut self, rule: Rule) {
        self.rules_off = self.rules_off.with(rule);
        self.guests.switch_off(rule);
        self.steer
            .reconfigure(steer_config(&self.settings, self.rules_off));
    }

    /// Weakens `rule` a little: only to prove that the simulation catches a rule nearly kept.
    /// Behind the `rule-switches` feature, which the shipped binary does not enable.
    #[cfg(any(test, feature = "rule-switches"))]
    pub fn weaken(&mut self, w: crate::steer::Weakening) {
        self.rules_off = self.rules_off.with_weakened(w);
        self.steer
            .reconfigure(steer_config(&self.settings, self.rules_off));
    }

    fn learning(&self) -> bool {
        matches!(self.lan.ports.target, Target::Ports(_))
    }

    fn on_deadline(&mut self, now: u64) {
        if let Some(due) = self.steer.next_due().filter(|d| *d <= now) {
            self.trouble.timer_ran(due, now);
        }
        if let Some(due) = self.schedule.eval_at.filter(|t| now >= *t) {
            self.trouble.timer_ran(due, now);
            self.schedule.eval_at = None;
            self.evaluate(now);
        }
        if self.learning() && now >= self.schedule.next_learning {
            Sender::learning_frames(&self.lan, &mut self.out);
            self.schedule.next_learning =
                now + self.settings.steering.learning_interval_secs * 1000;
        }
        self.steer.on_timer(now, &self.lan.ctx(), &mut self.actions);
        self.carry_out();
        let (sender, lan, out) = (&mut self.sender, &self.lan, &mut self.out);
        sender.retry_due(now, lan, out, &mut self.outcomes);
    }

    fn on_netlink(&mut self, now: u64, events: &[NlEvent]) {
        self.counters_to_samplers(now, events);
        let changes = self.lan.apply(now, events, &mut self.out);
        for &i in &changes.closed {
            self.capture_closed(i);
        }
        self.guests_topology();
        self.on_fdb(now, events);
        let ctx = self.lan.ctx();
        // The host's answers follow the MACs first: a swap may leave them on a dead port.
        let mut down = changes.down;
        for &p in &changes.flapped {
            self.steer.port_back(now, p);
        }
        down.extend(self.steer.follow_port_macs(now, &changes.macs, &ctx));
        for &(p, _) in &changes.macs {
            self.steer
                .on_port_mac_changed(now, p, &ctx, &mut self.actions);
        }
        // A client the failover could not place (no confirmed neighbour then) whose entry is
        // told now: its dead port is failed over again.
        let heard = |mac| {
            events
                .iter()
                .any(|e| matches!(e, NlEvent::Neigh(n) if n.mac == Some(mac)))
        };
        let usable = |p: usize| self.lan.ports.list.get(p).is_some_and(|p| p.usable());
        for p in self.steer.retry_unplaced(now, heard) {
            if !usable(p) && !down.contains(&p) {
                down.push(p);
            }
        }
        if !down.is_empty() || changes.up {
            self.fail_over(now, &down);
            self.fail_over_guests(now);
        }
        self.carry_out();
    }

    /// Moves every client off the `down` ports (and rescues those stranded while no port was
    /// up): every client in the table, not only this second's, since a quiet one must move too.
    fn fail_over(&mut self, now: u64, down: &[usize]) {
        let b = &mut self.bufs;
        let tick = self.schedule.tick;
        second::fill_snaps(&self.table, &self.lan.ports, false, tick, &mut b.snaps);
        self.lan.ports.views_into(&mut b.ports);
        let ctx = self.lan.ctx();
        self.steer
            .failover(now, down, &b.ports, &b.snaps, &ctx, &mut self.actions);
        self.durable.dirty = true;
    }

    /// An ARP or ND frame seen on a port: a foreign claim of the server's address is warned
    /// about; the steering core re-asserts the moves it puts at risk and notes the host's own
    /// answers.
    fn on_frame(&mut self, now: u64, frame: &Frame, outgoing: bool, vlan: u16) {
        let foreign = &mut self.trouble.foreign;
        if let Some(text) = frames::foreign_claim(&self.lan.host, foreign, now, frame, outgoing) {
            self.out.log(Level::Warn, Topic::ForeignClaim, text);
        }
        let ctx = self.lan.ctx();
        match frames::seen(frame, outgoing, vlan) {
            Some(Seen::Arp(a)) => self.steer.on_arp(now, &a, &ctx, &mut self.actions),
            Some(Seen::Nd(n)) => self.steer.on_nd(now, &n, &ctx, &mut self.actions),
            None => {}
        }
        // The record of whom the host answered where is durable state too (an answer that
        // repeats the record changes nothing). A frame makes or ends no move; the budgets its
        // re-assertions spend ride on the periodic rewrite.
        self.durable.dirty |= self.steer.take_durable_changed();
        self.carry_out();
    }

    /// Turns the steering core's actions into outputs (reusing the action buffer).
    fn carry_out(&mut self) {
        for a in self.actions.drain(..) {
            match a {
                Action::Send {
                    port,
                    client,
                    claim,
                    frame,
                    move_id,
                } => {
                    let update = (port, client, claim.client(), move_id);
                    let io = (&self.lan, &mut self.out);
                    self.sender.send(update, frame, io, &mut self.outcomes);
                }
                Action::Log(level, kind, text, fields) => {
                    let topic = match kind {
                        LogKind::Move => Topic::Move,
                        LogKind::Steer => Topic::Steer,
                    };
                    self.out.log_with(level, topic, text, fields);
                }
            }
        }
    }

    /// Tells the steering core what became of its frames (it may undo a move none of whose
    /// frames went out, and say so).
    fn report_outcomes(&mut self, now: u64) {
        while !self.outcomes.is_empty() {
            let ctx = self.lan.ctx();
            for (client, move_id, o) in self.outcomes.drain(..) {
                // Durable only when a move's first frame went out (it is confirmed) or its
                // frames were refused; the re-assertions of a confirmed move change nothing the
                // periodic rewrite does not carry.
                self.durable.dirty |=
                    self.steer
                        .on_send_result(now, client, move_id, o, &ctx, &mut self.actions);
            }
            // Only log lines come back, but carry them the same way.
            self.carry_out();
        }
    }

    /// Why `clients`' pins cannot stand on this daemon's ports (a pin to a port that is not
    /// one); `None` while the bond has no slaves yet, since none can be told apart then.
    pub fn pins_refused(&self, clients: &crate::config::ClientsConfig) -> Option<ConfigError> {
        reload::pins_refused(&self.lan.ports, clients)
    }

    /// Hands the durable state out when it changed, at most once a second.
    fn maybe_persist(&mut self, now: u64) {
        let off = self.rules_off.has(Rule::StateFile) || self.settings.dry_run;
        if off {
            // Nothing is handed out: nothing is due either (a dirty flag left set would ask for
            // a deadline that never passes, and the loop would spin).
            self.durable.dirty = false;
        } else if self.durable.due(now) {
            let mut p = persist::to_file(self.steer.export(now), &self.lan, now);
            p.guests = persist::guests_to_file(self.guests.export(), &self.lan);
            self.out.push(Output::Persist(Box::new(p)));
        }
    }

    /// Takes an earlier daemon's state back (at start, after the first view of the host): its
    /// moves re-asserted, their hold-downs kept; moves onto a port that failed meanwhile failed
    /// over.
    fn restore(&mut self, now: u64, p: Persisted, file: &str) {
        let hold = self.settings.policy.hold_down.saturating_mul(1000);
        let why = if self.rules_off.has(Rule::StateFile) {
            Some("the state file is switched off (a mutation run)".to_string())
        } else {
            persist::foreign(&p, &self.lan.ports.target, hold, now)
        };
        if let Some(why) = why {
            let text = format!("state file {file} ignored: {why}");
            self.out.log(Level::Warn, Topic::Restore, text);
            return;
        }
        let state = persist::from_file(&p, &self.lan);
        let (moves, answered) = (state.moves.len(), state.answered.len());
        let usable: Vec<bool> = self.lan.ports.list.iter().map(|p| p.usable()).collect();
        self.steer
            .import(now, state, |p| usable.get(p).copied().unwrap_or(false));
        let pins = persist::guests_from_file(&p, &self.lan);
        let guests = pins.len();
        self.lan.ports.views_into(&mut self.bufs.ports);
        self.guests
            .import(pins, &self.bufs.ports, &mut self.guest_actions);
        self.carry_out_guests();
        let text = format!(
            "state file {file}: {moves} moves taken over (re-asserted, their hold-downs kept), \
             {answered} answered clients, {guests} guests' pins; written {} ms ago",
            now - p.written_ms
        );
        self.out.log(Level::Info, Topic::Restore, text);
        let ctx = self.lan.ctx();
        self.steer.on_timer(now, &ctx, &mut self.actions);
        let down: Vec<usize> = (0..usable.len()).filter(|i| !usable[*i]).collect();
        if !down.is_empty() {
            self.fail_over(now, &down);
        }
        self.durable.dirty = true;
        self.carry_out();
    }
}

#[cfg(test)]
mod tests;
