//! The shell, simulated: hands the engine what the world did, carries out what it asks (frames
//! sent on the simulated wire, counters, captures, the state file), honours its deadlines, and
//! checks the rules. One run is one seed.

use rlbd::config::{Settings, Target};
use rlbd::engine::{Engine, Input, Output, Persisted, SendTag};
use rlbd::status::StatusReport;

use super::alloc;
use super::checks::{Check, Mutation};
use super::counting::Capture;
use super::relink::LinkEvent;
use super::resync::NlShell;
use super::rules::Rules;
use super::trace::Trace;
use rlbd::simulate::lan::{ToEngine, World};

pub struct Driver {
    pub now: u64,
    pub engine: Engine,
    pub settings: Settings,
    pub world: World,
    pub rules: Rules,
    pub trace: Trace,
    /// The last state the engine handed out (the state file).
    pub state: Option<Persisted>,
    pub status: Option<StatusReport>,
    /// World port index -> engine port index (by ifindex), as of the last second.
    pub(super) map: Vec<Option<usize>>,
    /// Probability that the kernel refuses a frame (ENOBUFS), for stretches of the run.
    pub refuse_p: f64,
    pub failure: Option<(Check, String)>,
    pub stats: Stats,
    /// A rule switched off or weakened in every engine of the run (mutation runs: its check
    /// must catch it).
    pub mutate: Option<Mutation>,
    /// The time of the last Second handed in: the evaluation follows `EVAL_DELAY_MS` after.
    last_second: u64,
    /// The last time the kernel refused frames now and then, or the engine was restarted.
    pub refusing_at: Option<u64>,
    pub restarted_at: u64,
    /// While the daemon is down (a restart takes 1-10 s): when it comes back, and whether with
    /// the state file.
    pub down: Option<(u64, bool)>,

    /// When the engine last handed the state file out.
    pub state_written_at: Option<u64>,
    /// Seconds left of a stretch in which the capture rings drop frames now and then.
    pub drops_left: u32,
    /// The evaluation of a second with ring drops is due: it must decide no move.
    pub veto: bool,
    /// `RLBD_SIM_WATCH`: every log line of the engine that contains it goes into the trace.
    pub watch: Option<String>,
    /// Warnings of a foreign claim of the server's address, and the last such claim.
    pub foreign_warnings: u64,
    pub last_foreign: Option<u64>,
    /// The engine's last input led to a frame, a log record, a summary or the state file.
    busy: bool,
    /// Link events due between the seconds (flaps, a new slave), by time.
    pub due_links: Vec<(u64, LinkEvent)>,
    /// The input being handled is the evaluation's deadline.
    evaluating: bool,
    /// The netlink reader: its resync mirror, an overrun in progress (`resync.rs`).
    pub nl: NlShell,
    /// The capture sockets: where each port counts, its ratio (`counting.rs`).
    pub capture: Capture,
}

#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub sends: u64,
    pub refused: u64,
    pub restarts: u64,
    pub restores: u64,
    pub port_failures: u64,
    pub reloads: u64,
    pub overruns: u64,
    /// Netlink messages lost to overruns, and the re-dumps that recovered them.
    pub netlink_lost: u64,
    pub redumps: u64,
    /// Kept frames handed in one by one (`Input::Counted`), and flows a second counted sampled.
    pub frames_counted: u64,
    pub sampling_changes: u64,
    pub sampled_counts: u64,
    /// The server's broadcast requests and re-announcements (`server_arp.rs`).
    pub server_broadcasts: u64,
    pub reannouncements: u64,
    pub foreign: u64,
    pub drop_seconds: u64,
    pub calms: u64,
    pub flaps: u64,
    pub mac_swaps: u64,
    pub renames: u64,
    pub releases: u64,
    pub enslaved: u64,
    /// Allocations inside the engine while it took seconds and deadlines, and frames.
    pub allocs_second: u64,
    /// Of those, the calls that sent, logged, summarised or handed the state file out (they
    /// build what they hand out), and the rest: quiet calls and their allocations (with the
    /// ports' counters asked for each second).
    pub calls_quiet: u64,
    pub allocs_quiet: u64,
    pub allocs_frame: u64,
    pub seconds: u64,
    pub frames: u64,
    pub frames_alloc_free: u64,
}

/// The client table: room for every client the run has (each may be seen on two VLANs or
/// addresses), or (`small`) two thirds of them, so that the table evicts.
pub fn table_size(population: usize, small: bool) -> usize {
    if small {
        (population * 2 / 3).max(16)
    } else {
        (2 * population).max(128)
    }
}

/// Whether seed `seed`'s client table is smaller than its population: every third seed on a
/// bond (3, 9, ...) by default; `RLBD_SIM_SMALL_TABLE=1` every seed on a bond, `=0` none.
pub fn small_table(seed: u64) -> bool {
    let bonded = seed % 2 == 1;
    match std::env::var("RLBD_SIM_SMALL_TABLE").as_deref() {
        Ok("0") => false,
        Ok(_) => bonded,
        Err(_) => bonded && seed % 3 == 0,
    }
}

/// Plain ports `p0`.., or (`bonded`) the slaves of bond0, each with its capacity configured
/// by name (a renamed or new slave's is its link speed); `small_table`: see [`table_size`].
pub fn settings(
    ports: &[rlbd::simulate::lan::ports::Port],
    bonded: bool,
    population: usize,
    small_table: bool,
) -> Settings {
    let names: Vec<String> = ports.iter().map(|p| p.name.clone()).collect();
    Settings {
        // `RLBD_SIM_LOG=debug` (with `RLBD_SIM_WATCH`) to follow one client closely.
        log_level: std::env::var("RLBD_SIM_LOG").unwrap_or_else(|_| "info".into()),
        capacity_mbps: ports
            .iter()
            .map(|p| (p.name.clone(), p.capacity_mbps))
            .collect(),
        // A total budget a port's failure can reach: the rate rule then has work to do.
        steering: rlbd::config::SteeringConfig {
            total_per_sec: 20,
            ..Default::default()
        },
        capture: rlbd::config::CaptureConfig {
            table_size: table_size(population, small_table),
            ..Default::default()
        },
        ..Settings::for_target(if bonded {
            Target::Bond("bond0".into())
        } else {
            Target::Ports(names.clone())
        })
    }
}

impl Driver {
    /// Odd seeds run on a bond (balance-alb, with VLAN 100), even ones on plain ports.
    pub fn new(seed: u64, ports: usize, population: usize, mutate: Option<Mutation>) -> Driver {
        let bonded = seed % 2 == 1;
        let small = small_table(seed);
        let mut world = World::new(seed, ports, population, bonded);
        world.with_guests(seed);
        let mut settings = settings(&world.ports, bonded, population, small);
        settings.guests.enabled = world.guests.is_some();
        let mode = super::counting::mode(seed);
        settings.capture.max_frames_per_sec = super::counting::limit(mode);
        // `[clients]`: the untagged IPv4 clients of slots 0, 1 and 3 are excluded (a prefix and
        // an address); no frame may ever go to whoever holds one (a slot outlives its MACs).
        settings.clients.exclude = vec!["198.18.0.10/31".into(), "198.18.0.13".into()];
        let excluded = [10, 11, 13]
            .map(|n| std::net::Ipv4Addr::new(198, 18, 0, n))
            .to_vec();
        let s = &settings.steering;
        let mut rules = Rules::new(s.per_client_per_sec, s.total_per_sec, &settings.policy);
        rules.moves.bound = settings.capture.table_size;
        rules.moves.evicting = settings.capture.table_size < population;
        rules.excluded = excluded;
        rules.balance.packet_bits = super::counting::packet_bits(mode);
        let mut engine = Engine::new(settings.clone(), 0);
        if let Some(m) = mutate {
            m.apply(&mut engine);
        }
        let mut d = Driver {
            now: 0,
            engine,
            settings,
            world,
            rules,
            // `RLBD_SIM_TRACE=n`: the last n events kept for a failure's report (200).
            trace: Trace::new(
                std::env::var("RLBD_SIM_TRACE")
                    .ok()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(200),
            ),
            state: None,
            status: None,
            map: Vec::new(),
            refuse_p: 0.0,
            failure: None,
            stats: Stats::default(),
            mutate,
            last_second: 0,
            refusing_at: None,
            restarted_at: 0,
            down: None,

            state_written_at: None,
            drops_left: 0,
            veto: false,
            watch: std::env::var("RLBD_SIM_WATCH").ok(),
            foreign_warnings: 0,
            last_foreign: None,
            busy: false,
            due_links: Vec::new(),
            evaluating: false,
            nl: NlShell::default(),
            capture: Capture::new(mode),
        };
        d.start_engine();
        d
    }

    /// The initial dump, as the daemon's setup hands it in.
    pub(super) fn start_engine(&mut self) {
        self.capture.restart();
        let dump = self.world.dump();
        self.nl = NlShell::fresh(&dump);
        self.input(Input::Netlink(&dump));
        self.remap();
        self.ports_agree();
    }

    /// Each world port's engine port, by ifindex (a renamed slave keeps its index, a new one
    /// takes the next, and a restarted engine numbers the slaves it finds afresh).
    pub(super) fn remap(&mut self) {
        let list = &self.engine.ports().list;
        self.map.clear();
        self.map.extend(self.world.ports.iter().map(|w| {
            list.iter()
                .position(|p| p.present && p.ifindex == w.ifindex)
        }));
    }

    pub fn fail(&mut self, check: Check, why: String) {
        if self.failure.is_none() {
            self.trace
                .note(self.now, || format!("RULE BROKEN ({check:?}): {why}"));
            self.failure = Some((check, why));
        }
    }

    /// Hands one input in and carries out everything it leads to (nothing while the daemon
    /// is down: what happens then it learns from its start-up dump).
    pub fn input(&mut self, input: Input) {
        if self.down.is_some() {
            return;
        }
        let frame = matches!(input, Input::Frame { .. });
        let kind = match input {
            Input::Second { .. } => {
                self.stats.seconds += 1;
                Some(&mut self.stats.allocs_second)
            }
            Input::Deadline => Some(&mut self.stats.allocs_second),
            Input::Frame { .. } => {
                self.stats.frames += 1;
                Some(&mut self.stats.allocs_frame)
            }
            _ => None,
        };
        let second = matches!(input, Input::Second { .. } | Input::Deadline);
        if matches!(input, Input::Second { .. }) {
            self.last_second = self.now;
        }
        // Moves are decided in the evaluation (`EVAL_DELAY_MS` after a second) or at once on
        // an event; a deadline at any other time only sends what waited (a retry, a turn of
        // the total rate limit), later than its move was decided.
        let eval = self.now == self.last_second + rlbd::engine::EVAL_DELAY_MS;
        self.rules.prompt = !matches!(input, Input::Deadline) || eval;
        // The veto is of the evaluation's moves, not of a failover on a link event.
        self.evaluating = matches!(input, Input::Deadline) && eval;
        let before = alloc::count();
        self.engine.handle(self.now, input);
        let made = alloc::count() - before;
        if let Some(k) = kind {
            *k += made;
        }
        if frame && made == 0 {
            self.stats.frames_alloc_free += 1;
        }
        self.busy = false;
        self.drain();
        self.answer_counters();
        self.answer_redump();
        self.guest_batch_done();
        if second && !self.busy {
            self.stats.calls_quiet += 1;
            self.stats.allocs_quiet += made;
        }
    }

    fn drain(&mut self) {
        while let Some(out) = self.engine.poll_output() {
            self.carry_out(out);
        }
    }

    pub(super) fn carry_out(&mut self, out: Output) {
        let now = self.now;
        match out {
            Output::Send { port, tag, frame } => {
                self.busy = true;
                self.stats.sends += 1;
                let wp = self
                    .world
                    .ports
                    .iter()
                    .position(|w| w.ifindex == port.ifindex);
                let up = wp.is_some_and(|p| self.world.ports[p].live());
                self.dead_target(&port, &tag);
                let result = if !up {
                    Err(Some(libc::ENETDOWN))
                } else if self.refuse_p > 0.0 && self.world.rng.chance(self.refuse_p) {
                    self.stats.refused += 1;
                    Err(Some(libc::ENOBUFS))
                } else {
                    Ok(())
                };
                // Each update the engine admits spends its budgets, whatever the kernel makes
                // of it; its retries (`tries` > 1) are the same update.
                if let SendTag::Update {
                    client, tries: 1, ..
                } = tag
                {
                    if let Err(e) = self.rules.limits.on_sent(now, client.mac) {
                        self.fail(Check::RateLimit, e);
                    }
                }
                let announce = matches!(tag, SendTag::Announce { .. });
                self.guest_sent(&tag, wp, result.is_ok(), &frame);
                if !matches!(tag, SendTag::Learning { .. }) || result.is_err() {
                    self.trace.note(now, || {
                        format!("send p{} {tag:?} -> {result:?}", port.id.index())
                    });
                }
                if let (Ok(()), Some(p), false) = (result, wp, announce) {
                    let prompt = self.rules.prompt;
                    // A retry is later than its move.
                    self.rules.prompt &= !matches!(tag, SendTag::Update { tries, .. } if tries > 1);
                    if let Err((check, e)) = self.rules.on_sent(now, &self.world, p, &frame) {
                        self.fail(check, e);
                    }
                    self.rules.prompt = prompt;
                    self.world.deliver(now, &frame);
                }
                self.engine
                    .handle(now, Input::SendResult { tag, frame, result });
            }
            Output::OpenCapture { port } => {
                // The link's speed: what a renamed or new slave's capacity comes from.
                let speed = self
                    .world
                    .ports
                    .iter()
                    .find(|w| w.ifindex == port.ifindex)
                    .map(|w| w.capacity_mbps as u64);
                self.capture.opened(now, port.ifindex);
                let input = Input::CaptureOpened {
                    port: port.id,
                    speed_mbps: speed,
                    error: None,
                };
                self.engine.handle(now, input);
            }
            // Answered together once the outputs are routed, as the reader reads them.
            Output::RequestCounters { ifindex } => self.nl.counters.push(ifindex),
            Output::Redump => self.nl.redump = true,
            Output::Persist(p) => {
                self.busy = true;
                self.state_written_at = Some(now);
                self.state = Some(*p);
            }
            Output::Status(r) => self.status = Some(*r),
            Output::Log {
                level,
                topic,
                text,
                fields,
            } => {
                self.busy = true;
                self.guest_log(&fields);
                if topic == rlbd::engine::Topic::ForeignClaim && level <= log::Level::Warn {
                    self.foreign_warnings += 1;
                }
                if self.veto && self.evaluating && topic == rlbd::engine::Topic::Move {
                    self.fail(
                        Check::RingDropVeto,
                        format!("a move decided on a second with capture ring drops: {text}"),
                    );
                }
                let watched = self
                    .watch
                    .as_ref()
                    .is_some_and(|w| text.contains(w.as_str()));
                use rlbd::engine::Topic;
                let kept = matches!(topic, Topic::Restore | Topic::Move | Topic::Port);
                if level <= log::Level::Warn || kept || watched {
                    self.trace
                        .note(now, || format!("log {level} {topic:?}: {text}"));
                }
            }
            Output::Summary(_) => self.busy = true,
            o @ (Output::CloseCapture { .. }
            | Output::AttachHook { .. }
            | Output::SetSampling { .. }) => self.carry_capture(o),
            Output::Refilter { .. } | Output::HostMacs(_) | Output::Reloaded(_) => {}
            // Carried out on the seeds with guests, a rule broken on the others (guest_shell.rs).
            o @ (Output::GuestPath { .. }
            | Output::GuestPort { .. }
            | Output::PinGuest { .. }
            | Output::UnpinGuest { .. }) => self.guest_output(o),
        }
    }

    /// What the world said since the last call, handed in.
    pub fn flush_world(&mut self) {
        if self.down.is_some() {
            self.world.to_engine.clear();
            return;
        }
        for m in std::mem::take(&mut self.world.to_engine) {
            match m {
                ToEngine::Netlink(ev) => self.netlink(ev),
                ToEngine::Frame(bytes, outgoing, vlan) => {
                    let Some(frame) = rlbd::capture::parse(&bytes) else {
                        let why = format!("the world made a frame that does not parse: {bytes:?}");
                        self.fail(Check::World, why);
                        continue;
                    };
                    self.input(Input::Frame {
                        frame: &frame,
                        outgoing,
                        vlan,
                    });
                }
            }
        }
    }

    /// Deadlines the engine asked for before `until`, in order.
    pub fn run_deadlines(&mut self, until: u64) {
        if self.down.is_some() {
            return;
        }
        let mut guard = 0;
        while let Some(d) = self.engine.next_deadline().filter(|d| *d < until) {
            self.now = self.now.max(d);
            self.input(Input::Deadline);
            guard += 1;
            if guard > 10_000 {
                let why = format!(
                    "engine asks for deadline {d} over and over (now {})",
                    self.now
                );
                self.fail(Check::Deadlines, why);
                return;
            }
        }
    }

    /// The second's traffic as the kernel's counts, handed in; then the status, and the rules.
    pub fn second(&mut self) {
        self.guests_before_traffic();
        let ring_drops = self.drops_left > 0 && self.world.rng.chance(0.5);
        self.drops_left = self.drops_left.saturating_sub(1);
        if ring_drops {
            self.stats.drop_seconds += 1;
        }
        // The rings drop frames this second (`counting.rs`): where they carry the counted
        // frames, the engine must make no move of the second.
        let (counts, facts, dropped) = self.count_second(ring_drops);
        self.guests_after_traffic();
        self.input(Input::Second {
            counts: &counts,
            ports: &facts,
        });
        self.veto = dropped;
        // After the second's counters: the re-dump's carry the same.
        self.overrun_reported();
        self.sampling_follows();
        if self.refuse_p > 0.0 {
            self.refusing_at = Some(self.now);
        }
        self.reasserted();
        self.state_file_follows();
        self.ports_agree();
        // The status (every client's line) is the dearest part of a quiet second: asked every
        // 5 s, and every second while a port is down (the dead-port rule's window is 2 s).
        if self.now % 5000 != 0 && self.world.ports.iter().all(|p| p.up || !p.enslaved) {
            return;
        }
        self.input(Input::StatusQuery { top: None });
        if let Some(st) = self.status.take() {
            if let Err((check, e)) = self.rules.after_second(self.now, &self.world, &st) {
                self.fail(check, e);
            }
        }
    }
}
