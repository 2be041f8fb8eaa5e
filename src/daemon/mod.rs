//! `rlbd run`, the shell around the pure parts: one thread, one `mio::Poll`. Timers, signals,
//! netlink, every capture socket and the control socket are events of the same loop, each read
//! in bounded batches so none starves the others.
//!
//! The loop only wires: netlink events go into the host view and the port table, captured frames
//! into the client table and (ARP, ND) the steering core, the once-a-second snapshot into the
//! steering core's planner; the core's actions (frames to send, lines to log) come back out here.
//! Once a second: roll the client table over and ask for link counters; 200 ms later, when the
//! counters are in, evaluate.

mod captures;
mod control;
mod decide;
mod events;
mod reload;
mod report;
mod retry;
mod setup;

use std::time::{Duration, Instant};

use log::info;
use mio::{Events, Interest, Poll, Token};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use signal_hook_mio::v1_0::Signals;

use crate::capture::{ClientTable, Frame};
use crate::config::{ConfigError, Settings, Target};
use crate::host::{HostView, PortTable};
use crate::netlink::RouteSocket;
use crate::steer::{Action, Ctx, PortInfo, SendOutcome, Steerer};
use captures::Captures;
pub use setup::Fatal;

const SIGNALS: Token = Token(0);
const NETLINK: Token = Token(1);
/// The control socket's listener; its connections are `CONTROL_CONN_BASE + slot` (above every
/// capture token).
const CONTROL: Token = Token(2);
const CONTROL_CONN_BASE: usize = 1 << 30;
const CAPTURE_BASE: usize = 16;

/// Frames handled per capture socket per wakeup, and netlink messages per wakeup.
const CAPTURE_BATCH: usize = 4096;
const NETLINK_BATCH: usize = 256;
const TICK: Duration = Duration::from_secs(1);
/// Time between asking for counters and using them: a dump answers in well under this.
const EVAL_DELAY: Duration = Duration::from_millis(200);

type Reload = Box<dyn Fn() -> Result<Settings, ConfigError>>;

/// The loop's clock: when the next second starts, when its evaluation is due.
struct Clock {
    start: Instant,
    /// Seconds since start (the client table's tick).
    tick: u64,
    next_tick: Instant,
    eval_at: Option<Instant>,
    next_learning: Instant,
}

impl Clock {
    fn ms(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.start).as_millis() as u64
    }
    fn at(&self, ms: u64) -> Instant {
        self.start + Duration::from_millis(ms)
    }
}

pub struct Daemon {
    settings: Settings,
    /// How `settings` was made, for SIGHUP.
    reload: Reload,
    poll: Poll,
    nl: RouteSocket,
    nl_ready: bool,
    nl_errors: u32,
    host: HostView,
    ports: PortTable,
    captures: Captures,
    table: ClientTable,
    steer: Steerer,
    clock: Clock,
    /// ARP and ND frames of one capture batch, handled after it (reused: no allocation per
    /// wakeup).
    arp_buf: Vec<(Frame, bool, u16)>,
    /// What the ports counted in the kernel in one second (reused, like `arp_buf`).
    kernel_counts: Vec<(usize, crate::capture::ebpf::Delta)>,
    count_buf: Vec<crate::capture::ebpf::Delta>,
    /// The server's addresses, for the capture path (copied from the host view on change).
    ours: Vec<std::net::IpAddr>,
    /// Interfaces on the bond already reported as not steerable.
    unsupported_seen: Vec<String>,
    /// The steering core's actions, carried out after each call into it (reused).
    actions: Vec<Action>,
    watchdog: bool,
    trouble: retry::Trouble,
}

/// Runs `f` with the steering core's view of the host and the ports.
fn with_ctx<R>(host: &HostView, ports: &PortTable, f: impl FnOnce(&Ctx) -> R) -> R {
    let infos: Vec<PortInfo> = ports
        .list
        .iter()
        .map(|p| PortInfo {
            name: &p.name,
            mac: p.mac,
            usable: p.usable(),
        })
        .collect();
    f(&Ctx {
        host,
        ports: &infos,
    })
}

impl Daemon {
    pub fn new(settings: Settings, reload: Reload) -> Result<Self, Fatal> {
        setup::build(settings, reload)
    }

    fn now_ms(&self) -> u64 {
        self.clock.ms(Instant::now())
    }

    /// Runs until SIGTERM or SIGINT.
    pub fn run(mut self) -> Result<(), Fatal> {
        let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP, SIGUSR1])
            .map_err(|e| Fatal::io("cannot install signal handlers", e))?;
        self.poll
            .registry()
            .register(&mut signals, SIGNALS, Interest::READABLE)
            .map_err(|e| Fatal::io("cannot register signals", e))?;
        self.poll
            .registry()
            .register(self.nl.socket_mut(), NETLINK, Interest::READABLE)
            .map_err(|e| Fatal::io("cannot register the netlink socket", e))?;
        // Served by this loop; dropping it (any return below) removes the socket file.
        let mut control = self.open_control()?;
        setup::sd_notify(&format!("READY=1\nSTATUS={}", self.summary()));
        info!("{}", self.summary());
        let mut events = Events::with_capacity(64);
        loop {
            let busy = self.nl_ready || self.captures.ready.iter().any(|r| *r);
            let timeout = if busy {
                Duration::ZERO
            } else {
                self.next_deadline()
                    .saturating_duration_since(Instant::now())
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Fatal::io("poll failed", e));
            }
            for ev in events.iter() {
                match ev.token() {
                    SIGNALS => {
                        for sig in signals.pending() {
                            match sig {
                                SIGTERM | SIGINT => {
                                    info!("signal {sig}: exiting");
                                    setup::sd_notify("STOPPING=1");
                                    return Ok(());
                                }
                                SIGHUP => {
                                    // Logged; SIGHUP has no one to answer.
                                    let _ = self.reload("SIGHUP");
                                }
                                SIGUSR1 => self.log_state(),
                                _ => {}
                            }
                        }
                    }
                    NETLINK => self.nl_ready = true,
                    t if control::owns(t) => control.on_event(ev, self.poll.registry(), &self),
                    t => {
                        if let Some(i) = self.captures.port_of(t) {
                            self.captures.ready[i] = true;
                        }
                    }
                }
            }
            if control.reload_requested() {
                let result = self.reload("reload request");
                control.answer_reloads(&result, self.poll.registry());
            }
            if self.nl_ready {
                self.read_netlink();
            }
            for i in 0..self.captures.ready.len() {
                if self.captures.ready[i] {
                    self.read_capture(i);
                }
            }
            self.run_timers();
            control.on_timer(
                Instant::now(),
                self.poll.registry(),
                &self.settings.observability,
                &self,
            );
        }
    }

    fn next_deadline(&self) -> Instant {
        let c = &self.clock;
        let mut d = c.next_tick;
        if let Some(e) = c.eval_at {
            d = d.min(e);
        }
        if let Some(ms) = self.steer.next_due() {
            d = d.min(c.at(ms));
        }
        if let Some(ms) = self.trouble.retries.next_due() {
            d = d.min(c.at(ms));
        }
        if matches!(self.ports.target, Target::Ports(_)) {
            d = d.min(c.next_learning);
        }
        d
    }

    fn run_timers(&mut self) {
        let now = Instant::now();
        let now_ms = self.clock.ms(now);
        if let Some(due) = self.steer.next_due().filter(|d| *d <= now_ms) {
            self.trouble.timer_ran(due, now_ms);
        }
        if now >= self.clock.next_tick {
            let due = self.clock.ms(self.clock.next_tick);
            self.trouble.timer_ran(due, now_ms);
            self.on_tick();
            self.clock.next_tick += TICK;
            if self.clock.next_tick <= now {
                // Fell behind (suspended, or a slow machine): skip, do not burst.
                self.clock.next_tick = now + TICK;
            }
        }
        if self.clock.eval_at.is_some_and(|t| now >= t) {
            self.clock.eval_at = None;
            self.evaluate();
        }
        if matches!(self.ports.target, Target::Ports(_)) && now >= self.clock.next_learning {
            self.send_learning_frames();
            self.clock.next_learning =
                now + Duration::from_secs(self.settings.steering.learning_interval_secs);
        }
        let now_ms = self.now_ms();
        with_ctx(&self.host, &self.ports, |ctx| {
            self.steer.on_timer(now_ms, ctx, &mut self.actions)
        });
        self.carry_out();
        self.retry_sends(now_ms);
    }

    fn on_tick(&mut self) {
        let counted_whole = self.feed_kernel_counts();
        self.clock.tick += 1;
        self.table.roll_over(self.clock.tick);
        // Only the ports' counters: a dump of every link costs in proportion to the host's links.
        for p in self.ports.list.iter().filter(|p| p.present) {
            if let Err(e) = self.nl.request_link(p.ifindex) {
                log::warn!("cannot request link counters: {e}");
            }
        }
        self.clock.eval_at = Some(Instant::now() + EVAL_DELAY);
        self.trouble.rates_unreliable =
            self.captures.update_drops(&mut self.ports) || !counted_whole;
        let now_ms = self.now_ms();
        let table = &self.table;
        self.steer
            .forget_idle(now_ms, |key| table.get(key).is_some(), &mut self.actions);
        self.carry_out();
        if self.watchdog {
            setup::sd_notify("WATCHDOG=1");
        }
        if self.clock.tick % 10 == 0 {
            setup::sd_notify(&format!("STATUS={}", self.summary()));
        }
    }

    /// Feeds what the ports counted in the kernel over the second that ends into the client
    /// table, as if each frame had been captured in it. False when a map could not be read
    /// whole.
    fn feed_kernel_counts(&mut self) -> bool {
        let mut counts = std::mem::take(&mut self.kernel_counts);
        let mut buf = std::mem::take(&mut self.count_buf);
        let whole = self
            .captures
            .read_counts(&self.ports, &mut counts, &mut buf);
        let ours = &self.ours;
        self.table
            .account_kernel_counts(&counts, self.clock.tick, |ip| ours.contains(&ip));
        self.kernel_counts = counts;
        self.count_buf = buf;
        whole
    }

    /// Carries out what the steering core decided: frames onto the wire, lines into the log.
    /// Each frame's outcome, once known, goes back to the core.
    fn carry_out(&mut self) {
        let mut actions = std::mem::take(&mut self.actions);
        let mut outcomes = Vec::new();
        for a in actions.drain(..) {
            match a {
                Action::Send {
                    port,
                    client,
                    claim,
                    frame,
                    move_id,
                } => {
                    for id in self.trouble.retries.supersede(client) {
                        outcomes.push((client, id, SendOutcome::Refused));
                    }
                    let what = || format!("the update to {} ({client})", claim.client());
                    let update = retry::Update {
                        port,
                        client,
                        move_id,
                        frame,
                    };
                    if let Some(o) = self.send_or_retry(update, 1, &what) {
                        outcomes.push((client, move_id, o));
                    }
                }
                Action::Log(level, msg) => log::log!(level, "{msg}"),
            }
        }
        // Kept (empty) for the next call: no allocation per batch.
        self.actions = actions;
        self.report_outcomes(outcomes);
    }

    /// Tells the steering core what became of its frames (it may undo a move none of whose
    /// frames went out, and say so in the log).
    fn report_outcomes(&mut self, outcomes: Vec<(crate::client::ClientKey, u64, SendOutcome)>) {
        if outcomes.is_empty() {
            return;
        }
        let now_ms = self.now_ms();
        let (steer, out) = (&mut self.steer, &mut self.actions);
        with_ctx(&self.host, &self.ports, |ctx| {
            for (client, id, o) in outcomes {
                steer.on_send_result(now_ms, client, id, o, ctx, out);
            }
        });
        // Only log lines come back from outcomes.
        for a in std::mem::take(&mut self.actions) {
            if let Action::Log(level, msg) = a {
                log::log!(level, "{msg}");
            }
        }
    }

    /// Sends one update frame; a refusal is counted, logged (rate-limited) and, when transient,
    /// queued for another try. Returns the frame's outcome, unless a retry is queued.
    fn send_or_retry(
        &mut self,
        update: retry::Update,
        tries: usize,
        what: &dyn Fn() -> String,
    ) -> Option<SendOutcome> {
        let port = update.port;
        let e = match self.captures.try_send(port, &update.frame) {
            Some(Ok(())) => return Some(SendOutcome::Sent),
            // No socket: the port is gone.
            None => return Some(SendOutcome::Refused),
            Some(Err(e)) => e,
        };
        let now_ms = self.now_ms();
        let name = self.ports.list.get(port).map_or("?", |p| p.name.as_str());
        let r = &mut self.trouble.retries;
        let refusal = r.failed(now_ms, update, tries, e.raw_os_error());
        match refusal.warn {
            Some(n) if n > 1 => log::warn!(
                "port {name}: cannot send {}: {e} ({} more refused since the last warning)",
                what(),
                n - 1
            ),
            Some(_) => log::warn!("port {name}: cannot send {}: {e}", what()),
            None => log::debug!("port {name}: cannot send {}: {e}", what()),
        }
        (!refusal.retrying).then_some(SendOutcome::Refused)
    }

    /// Refused frames whose retry is due, on ports still usable (a port that went down is the
    /// failover's business: its frames are refused for good).
    fn retry_sends(&mut self, now_ms: u64) {
        let mut outcomes = Vec::new();
        for p in self.trouble.retries.due(now_ms) {
            let (client, move_id) = (p.update.client, p.update.move_id);
            if !self
                .ports
                .list
                .get(p.update.port)
                .is_some_and(|x| x.usable())
            {
                outcomes.push((client, move_id, SendOutcome::Refused));
                continue;
            }
            let what = || format!("the retried update to {client}");
            if let Some(o) = self.send_or_retry(p.update, p.tries + 1, &what) {
                outcomes.push((client, move_id, o));
            }
        }
        self.report_outcomes(outcomes);
    }

    /// Ports mode: keeps the switch's MAC table pointing at every port (a port that only
    /// receives would be forgotten by the switch and flooded).
    fn send_learning_frames(&mut self) {
        for (i, p) in self.ports.list.iter().enumerate() {
            if let Some(c) = self.captures.get(i).filter(|_| p.usable()) {
                if let Err(e) = c.send(&crate::steer::learning_frame(p.mac)) {
                    log::debug!("port {}: learning frame not sent: {e}", p.name);
                }
            }
        }
    }
}
