//! `rlbd run`, the shell around the engine: one thread, one `mio::Poll`. It owns the sockets and
//! the clock and moves bytes; every decision is the engine's (`crate::engine`).
//!
//! Each wakeup: signals, netlink messages, captured frames and control requests become engine
//! inputs (in bounded batches, so none starves the others); once a second the kernel's counts
//! and the sockets' facts do; the engine's deadlines come back as `Input::Deadline`. After
//! every input the engine's outputs are routed (`edge.rs`): frames to the capture sockets,
//! log records to the log, captures opened and closed, counting hooks attached, sampling ratios
//! set, counters asked for, the state file written; what became of each is queued and handed
//! back once they are all routed.

mod captures;
mod control;
mod counting;
mod edge;
mod guests;
mod inspect;
mod netlink;
mod reload;
mod report;
mod setup;
mod state_file;

pub use inspect::check_live;

use std::time::{Duration, Instant};

use mio::{Events, Interest, Token};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use signal_hook_mio::v1_0::Signals;

use crate::config::{ConfigError, ObservabilityConfig, Settings, Target};
use crate::engine::{Engine, Input, Output};
use crate::exit::Failure;
use crate::netlink::Snapshot;
use control::Control;
use counting::CountingInput;
use edge::Edge;
use report::Answers;

const SIGNALS: Token = Token(0);
const NETLINK: Token = Token(1);
/// The control socket's listener; its connections are `CONTROL_CONN_BASE + slot` (above every
/// capture token).
const CONTROL: Token = Token(2);
const CONTROL_CONN_BASE: usize = 1 << 30;
const CAPTURE_BASE: usize = 16;
const SECOND: Duration = Duration::from_secs(1);

type Reload = Box<dyn Fn() -> Result<Settings, ConfigError>>;

/// Microseconds on the system's monotonic clock (CLOCK_MONOTONIC), as systemd's
/// `MONOTONIC_USEC=` wants it.
pub fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid pointer it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// Milliseconds on the same clock: the engine's time, the same in every process until a reboot
/// (so a state file's times mean the same to the next daemon).
pub fn monotonic_ms() -> u64 {
    monotonic_usec() / 1000
}

pub struct Daemon {
    engine: Engine,
    /// The sockets and files the engine's outputs go to.
    edge: Edge,
    /// How the settings were made, for a reload.
    reload: Reload,
    counting: CountingInput,
    /// When the next second ends (the kernel's counts are read then).
    next_second: Instant,
    watchdog: bool,
    /// The control socket's and metrics file's settings (kept apart from the engine's: the
    /// control server reads them while the engine answers).
    observability: ObservabilityConfig,
    /// Outputs taken out of the engine while answering a request, routed after it.
    stashed: Vec<Output>,
}

impl Daemon {
    /// A daemon for `settings`; `reload` makes them anew (SIGHUP); `state_file` is where the
    /// durable state goes (`None`: the default, see `setup`; empty: none).
    pub fn new(
        settings: Settings,
        reload: Reload,
        state_file: Option<std::path::PathBuf>,
    ) -> Result<Self, Failure> {
        setup::build(settings, reload, state_file)
    }

    /// Runs until SIGTERM or SIGINT.
    pub fn run(mut self) -> Result<(), Failure> {
        let mut signals = self.register()?;
        // Served by this loop; dropping it (any return below) removes the socket file.
        let name = match &self.engine.settings().target {
            Some(Target::Bond(b)) => b.clone(),
            Some(Target::Ports(p)) => p.first().cloned().unwrap_or_default(),
            None => String::new(),
        };
        let mut control = Control::open(&name, &self.observability, self.edge.poll.registry())?;
        let summary = self.status(Some(0)).summary();
        setup::sd_notify(&format!("READY=1\nSTATUS={summary}"));
        self.engine.handle(monotonic_ms(), Input::Started);
        self.route();
        let mut events = Events::with_capacity(64);
        loop {
            let timeout = self.timeout();
            if let Err(e) = self.edge.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Failure::io("poll failed", e));
            }
            for ev in events.iter() {
                match ev.token() {
                    SIGNALS => {
                        if self.on_signals(&mut signals) {
                            control.remove_metrics_file();
                            return Ok(());
                        }
                    }
                    NETLINK => self.edge.nl.ready = true,
                    t if control::owns(t) => {
                        let mut answers = Answers {
                            engine: &mut self.engine,
                            captures: &self.edge.captures,
                            stash: &mut self.stashed,
                        };
                        control.on_event(ev, self.edge.poll.registry(), &mut answers);
                        self.route_stashed();
                    }
                    t => {
                        if let Some(i) = self.edge.captures.port_of(t) {
                            self.edge.captures.ready[i] = true;
                        }
                    }
                }
            }
            if control.reload_requested() {
                let result = self.reload("reload request");
                control.answer_reloads(&result, self.edge.poll.registry());
            }
            self.step();
            let mut answers = Answers {
                engine: &mut self.engine,
                captures: &self.edge.captures,
                stash: &mut self.stashed,
            };
            control.on_timer(
                Instant::now(),
                self.edge.poll.registry(),
                &self.observability,
                &mut answers,
            );
            self.route_stashed();
        }
    }

    /// Signals and the netlink socket as events of the loop.
    fn register(&mut self) -> Result<Signals, Failure> {
        let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP, SIGUSR1])
            .map_err(|e| Failure::io("cannot install signal handlers", e))?;
        let registry = self.edge.poll.registry();
        registry
            .register(&mut signals, SIGNALS, Interest::READABLE)
            .map_err(|e| Failure::io("cannot register signals", e))?;
        registry
            .register(self.edge.nl.sock.socket_mut(), NETLINK, Interest::READABLE)
            .map_err(|e| Failure::io("cannot register the netlink socket", e))?;
        Ok(signals)
    }

    /// The signals that arrived; true when one says to exit.
    fn on_signals(&mut self, signals: &mut Signals) -> bool {
        for sig in signals.pending() {
            match sig {
                SIGTERM | SIGINT => {
                    self.engine
                        .handle(monotonic_ms(), Input::Stopping { signal: sig });
                    self.route();
                    setup::sd_notify("STOPPING=1");
                    return true;
                }
                SIGHUP => {
                    // Logged; SIGHUP has no one to answer.
                    let _ = self.reload("SIGHUP");
                }
                SIGUSR1 => {
                    let captures = report::capture_facts(&self.edge.captures);
                    let input = Input::DumpState {
                        captures: &captures,
                    };
                    self.engine.handle(monotonic_ms(), input);
                    self.route();
                }
                _ => {}
            }
        }
        false
    }

    /// How long the loop may sleep: not at all while a socket has more to read.
    fn timeout(&self) -> Duration {
        if self.edge.nl.ready || self.edge.captures.ready.iter().any(|r| *r) {
            return Duration::ZERO;
        }
        let now = Instant::now();
        let mut wait = self.next_second.saturating_duration_since(now);
        if let Some(d) = self.engine.next_deadline() {
            wait = wait.min(Duration::from_millis(d.saturating_sub(monotonic_ms())));
        }
        wait
    }

    /// One turn of the loop after the wakeup's events: read what is ready, end the second if it
    /// is due, hand the engine its deadline.
    fn step(&mut self) {
        if self.edge.nl.ready {
            self.read_netlink();
        }
        for i in 0..self.edge.captures.ready.len() {
            if self.edge.captures.ready[i] {
                let now = monotonic_ms();
                let (counting, captures) = (&mut self.counting, &mut self.edge.captures);
                counting.drain(now, i, captures, &mut self.engine);
                self.route();
                // ARP and ND after the batch: each may send.
                while let Some((frame, outgoing, vlan)) = self.counting.next_frame() {
                    let input = Input::Frame {
                        frame: &frame,
                        outgoing,
                        vlan,
                    };
                    self.engine.handle(now, input);
                    self.route();
                }
            }
        }
        let now = Instant::now();
        if now >= self.next_second {
            self.edge.guests.second(monotonic_ms(), &mut self.engine);
            self.route();
            let secs = monotonic_ms() / 1000;
            if self.engine.settings().guests.enabled && secs % crate::guests::MACVLAN_DUMP_SECS == 0
            {
                self.edge.nl.request_fdb();
            }
            let (counting, captures) = (&mut self.counting, &mut self.edge.captures);
            counting.second(monotonic_ms(), captures, &mut self.engine);
            self.route();
            if self.watchdog {
                setup::sd_notify("WATCHDOG=1");
            }
            self.next_second += SECOND;
            if self.next_second <= now {
                // Fell behind (suspended, or a slow machine): skip, do not burst.
                self.next_second = now + SECOND;
            }
        }
        let now = monotonic_ms();
        if self.engine.next_deadline().is_some_and(|d| d <= now) {
            self.engine.handle(now, Input::Deadline);
            self.route();
        }
    }

    fn read_netlink(&mut self) {
        let now = monotonic_ms();
        self.edge.nl.read();
        self.engine
            .handle(now, Input::Netlink(self.edge.nl.events()));
        self.route();
    }

    /// Carries out everything the engine asked for since the last call.
    fn route(&mut self) {
        self.edge.route(&mut self.engine);
    }

    /// Routes what answering a request took out of the engine besides the answer.
    fn route_stashed(&mut self) {
        for o in std::mem::take(&mut self.stashed) {
            self.edge.carry(o);
        }
        self.route();
    }

    /// The status as the engine reports it, with the capture sockets' figures.
    fn status(&mut self, top: Option<usize>) -> crate::status::StatusReport {
        let r = report::answer_status(
            &mut self.engine,
            &self.edge.captures,
            &mut self.stashed,
            top,
        );
        self.route_stashed();
        r
    }

    /// A reload (SIGHUP, or `rlbd reload` over the control socket) under systemd's reload
    /// protocol. `why`: "SIGHUP" or "reload request", for the log. `Ok`: what was done; `Err`:
    /// why nothing was (a bad file changes nothing: the daemon runs on with its settings).
    fn reload(&mut self, why: &str) -> Result<String, String> {
        setup::sd_notify(&reload::reloading(monotonic_usec()));
        let result = self.reload_config(why);
        let summary = self.status(Some(0)).summary();
        setup::sd_notify(&format!("READY=1\nSTATUS={summary}"));
        result
    }

    /// The configuration read again and handed to the engine, which keeps all its state
    /// (moves, rates, the client table) and answers. What the shell holds (the log level, the
    /// control socket's settings) it applies when the engine accepts the settings.
    fn reload_config(&mut self, why: &str) -> Result<String, String> {
        let mut observability = None;
        let input = match (self.reload)() {
            Ok(new) => {
                self.edge.reload_level = Some(new.log_level.clone());
                observability = Some(new.observability.clone());
                let settings = Box::new(new);
                Input::Reload { settings, why }
            }
            Err(e) => Input::ReloadFailed {
                why,
                error: e.to_string(),
            },
        };
        self.engine.handle(monotonic_ms(), input);
        self.route();
        self.edge.reload_level = None;
        let answer = self.edge.reloaded.take();
        let answer = answer.unwrap_or_else(|| Err("the engine gave no answer".into()));
        if let (Ok(_), Some(o)) = (&answer, observability) {
            self.observability = o;
        }
        answer
    }

    /// The start-up snapshot into the engine, the ports found, checked and captured, and an
    /// earlier daemon's state taken over.
    fn start(&mut self, snap: Snapshot) -> Result<(), Failure> {
        use crate::netlink::NlEvent;
        let events: Vec<NlEvent> = snap
            .links
            .into_iter()
            .map(NlEvent::Link)
            .chain(snap.addrs.into_iter().map(NlEvent::Addr))
            .chain(snap.neighbours.into_iter().map(NlEvent::Neigh))
            .chain(snap.fdb.into_iter().map(NlEvent::Fdb))
            .collect();
        self.engine.handle(monotonic_ms(), Input::Netlink(&events));
        // A shape rlbd cannot steer is a configuration to change, not a reason to run half
        // blind: the clients behind it would stay where the driver put them, silently.
        if let Some((name, why)) = self.engine.unsupported().first() {
            return Err(Failure::config(format!(
                "interface {name} on the bond cannot be steered: {why}"
            )));
        }
        if let Some(why) = self.engine.guests_refused() {
            return Err(Failure::config(format!("[guests] enabled: {why}")));
        }
        if let Some(e) = self.engine.pins_refused(&self.engine.settings().clients) {
            return Err(Failure::config(e.to_string()));
        }
        self.edge.route_start(&mut self.engine)?;
        if let Some(state) = self.edge.state.read() {
            let file = self.edge.state.path().map(|p| p.display().to_string());
            let input = Input::Restore {
                state: Box::new(state),
                file: file.unwrap_or_default(),
            };
            self.engine.handle(monotonic_ms(), input);
            self.route();
        }
        // First counters now, so the first evaluation has a rate.
        if let Err(e) = self.edge.nl.sock.request_links() {
            log::warn!("cannot request link counters: {e}");
        }
        Ok(())
    }
}
