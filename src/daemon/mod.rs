//! `rlbd run`, the shell around the engine: one thread, one `mio::Poll`. It owns the sockets and
//! the clock and moves bytes; every decision is the engine's (`crate::engine`).
//!
//! Each wakeup: signals, netlink messages, captured frames and control requests become engine
//! inputs (in bounded batches, so none starves the others); once a second the kernel's counts
//! do; the engine's deadlines come back as `Input::Deadline`. After every input the engine's
//! outputs are routed: frames to the capture sockets (their outcome back in), log records to
//! the log, captures opened and closed, counters asked for, the state file written.

mod captures;
mod control;
mod counting;
mod netlink;
mod reload;
mod route;
mod setup;
mod state_file;

use std::time::{Duration, Instant};

use log::info;
use mio::{Events, Interest, Poll, Token};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use signal_hook_mio::v1_0::Signals;

use crate::config::{ConfigError, Settings};
use crate::engine::{Engine, Input, Output};
use crate::exit::Failure;
use captures::Captures;
use counting::Counting;
use netlink::NetlinkReader;
use state_file::StateFile;

const SIGNALS: Token = Token(0);
const NETLINK: Token = Token(1);
/// The control socket's listener; its connections are `CONTROL_CONN_BASE + slot` (above every
/// capture token).
const CONTROL: Token = Token(2);
const CONTROL_CONN_BASE: usize = 1 << 30;
const CAPTURE_BASE: usize = 16;
const SECOND: Duration = Duration::from_secs(1);

type Reload = Box<dyn Fn() -> Result<Settings, ConfigError>>;

/// Milliseconds on the system's monotonic clock: the engine's time, the same in every process
/// until a reboot (so a state file's times mean the same to the next daemon).
pub fn monotonic_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid pointer it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

pub struct Daemon {
    engine: Engine,
    /// How the settings were made, for a reload.
    reload: Reload,
    poll: Poll,
    nl: NetlinkReader,
    captures: Captures,
    counting: Counting,
    state: StateFile,
    /// When the next second ends (the kernel's counts are read then).
    next_second: Instant,
    watchdog: bool,
    /// The control socket's and metrics file's settings (kept apart from the engine's: the
    /// control server reads them while the engine answers).
    observability: crate::config::ObservabilityConfig,
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
        let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP, SIGUSR1])
            .map_err(|e| Failure::io("cannot install signal handlers", e))?;
        self.poll
            .registry()
            .register(&mut signals, SIGNALS, Interest::READABLE)
            .map_err(|e| Failure::io("cannot register signals", e))?;
        self.poll
            .registry()
            .register(self.nl.sock.socket_mut(), NETLINK, Interest::READABLE)
            .map_err(|e| Failure::io("cannot register the netlink socket", e))?;
        // Served by this loop; dropping it (any return below) removes the socket file.
        let mut control = self.open_control()?;
        let summary = self.summary();
        setup::sd_notify(&format!("READY=1\nSTATUS={summary}"));
        info!("{summary}");
        let mut events = Events::with_capacity(64);
        loop {
            let timeout = self.timeout();
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Failure::io("poll failed", e));
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
                                SIGHUP => self.reload_config(),
                                SIGUSR1 => self.log_state(),
                                _ => {}
                            }
                        }
                    }
                    NETLINK => self.nl.ready = true,
                    t if control::owns(t) => {
                        let mut answers = route::Answers {
                            engine: &mut self.engine,
                            captures: &self.captures,
                            stash: &mut self.stashed,
                        };
                        control.on_event(ev, self.poll.registry(), &mut answers);
                        self.route_stashed();
                    }
                    t => {
                        if let Some(i) = self.captures.port_of(t) {
                            self.captures.ready[i] = true;
                        }
                    }
                }
            }
            self.step();
            let mut answers = route::Answers {
                engine: &mut self.engine,
                captures: &self.captures,
                stash: &mut self.stashed,
            };
            control.on_timer(
                Instant::now(),
                self.poll.registry(),
                &self.observability,
                &mut answers,
            );
            self.route_stashed();
        }
    }

    /// How long the loop may sleep: not at all while a socket has more to read.
    fn timeout(&self) -> Duration {
        if self.nl.ready || self.captures.ready.iter().any(|r| *r) {
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
        if self.nl.ready {
            self.read_netlink();
        }
        for i in 0..self.captures.ready.len() {
            if self.captures.ready[i] {
                let now = monotonic_ms();
                self.counting
                    .drain(now, i, &mut self.captures, &mut self.engine);
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
            self.counting
                .second(monotonic_ms(), &mut self.captures, &mut self.engine);
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
        self.nl.read();
        // The port's packet rate chooses its capture sampling ratio (the capture's own tuning).
        for ev in self.nl.events() {
            if let crate::netlink::NlEvent::Link(l) = ev {
                let ports = self.engine.ports();
                if let (Some(i), Some(pk)) = (ports.by_ifindex(l.index), l.rx_packets) {
                    self.captures.sample_from_counter(ports, i, now, pk);
                }
            }
        }
        self.engine.handle(now, Input::Netlink(self.nl.events()));
        self.route();
    }
}
