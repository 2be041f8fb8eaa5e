//! `rlbd run`: one thread, one `mio::Poll`. Timers, signals, netlink and every capture socket
//! are events of the same loop, each read in bounded batches so none starves the others.
//!
//! The loop only wires: `netlink` and `capture` feed state, `policy` decides, `steer` builds the
//! frames. Once a second: roll the client table over and ask for link counters; 200 ms later,
//! when the counters are in, evaluate.

mod control;
mod decide;
mod ports;
mod report;
mod setup;
mod steering;

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use log::{debug, error, info, warn};
use mio::{Events, Interest, Poll, Token};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use signal_hook_mio::v1_0::Signals;

use crate::capture::{parse, ClientTable, Frame};
use crate::config::{Settings, Target};
use crate::netlink::{LinkInfo, Mac, NlEvent, RouteSocket};
use crate::policy::{self, Reason};
pub use setup::Fatal;
use steering::Steering;

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

pub struct Daemon {
    settings: Settings,
    /// How `settings` was made, for SIGHUP.
    reload: Box<dyn Fn() -> Result<Settings, crate::config::ConfigError>>,
    poll: Poll,
    nl: RouteSocket,
    links: HashMap<u32, LinkInfo>,
    /// Confirmed neighbours on the server's interfaces: (ifindex, IP) -> MAC.
    neigh: HashMap<(u32, Ipv4Addr), Mac>,
    /// The same for IPv6 neighbours.
    neigh6: HashMap<(u32, Ipv6Addr), Mac>,
    /// The server's IPv4 addresses: (ifindex, address, prefix).
    addrs: Vec<(u32, ipnetwork::Ipv4Network)>,
    /// The server's IPv6 addresses: (ifindex, address).
    addrs6: Vec<(u32, Ipv6Addr)>,
    ports: ports::Ports,
    table: ClientTable,
    steering: Steering,
    tick: u64,
    start: Instant,
    next_tick: Instant,
    eval_at: Option<Instant>,
    next_learning: Instant,
    nl_ready: bool,
    nl_errors: u32,
    capture_ready: Vec<bool>,
    arp_buf: Vec<(Frame, bool)>,
    pub moves_total: HashMap<Reason, u64>,
    watchdog: bool,
}

impl Daemon {
    pub fn new(
        settings: Settings,
        reload: Box<dyn Fn() -> Result<Settings, crate::config::ConfigError>>,
    ) -> Result<Self, Fatal> {
        setup::build(settings, reload)
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
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
        for i in 0..self.ports.list.len() {
            self.register_capture(i);
        }
        // Served by this loop; dropping it (any return below) removes the socket file.
        let mut control = self.open_control()?;
        setup::sd_notify(&format!("READY=1\nSTATUS={}", self.summary()));
        info!("{}", self.summary());
        let mut events = Events::with_capacity(64);
        loop {
            let now = Instant::now();
            let busy = self.nl_ready || self.capture_ready.iter().any(|r| *r);
            let timeout = if busy {
                Duration::ZERO
            } else {
                self.next_deadline().saturating_duration_since(now)
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
                                SIGHUP => self.reload_config(),
                                SIGUSR1 => self.log_state(),
                                _ => {}
                            }
                        }
                    }
                    NETLINK => self.nl_ready = true,
                    t if control::owns(t) => {
                        control.on_event(ev, self.poll.registry(), &|| self.status())
                    }
                    Token(t) if t >= CAPTURE_BASE => {
                        if let Some(r) = self.capture_ready.get_mut(t - CAPTURE_BASE) {
                            *r = true;
                        }
                    }
                    _ => {}
                }
            }
            if self.nl_ready {
                self.read_netlink();
            }
            for i in 0..self.capture_ready.len() {
                if self.capture_ready[i] {
                    self.read_capture(i);
                }
            }
            self.run_timers();
            control.on_timer(
                Instant::now(),
                self.poll.registry(),
                &self.settings.observability,
                &|| self.status(),
            );
        }
    }

    fn next_deadline(&self) -> Instant {
        let mut d = self.next_tick;
        if let Some(e) = self.eval_at {
            d = d.min(e);
        }
        if let Some(p) = self.steering.next_due() {
            d = d.min(p);
        }
        if matches!(self.ports.target, Target::Ports(_)) {
            d = d.min(self.next_learning);
        }
        d
    }

    fn register_capture(&mut self, i: usize) {
        if self.capture_ready.len() <= i {
            self.capture_ready.resize(i + 1, false);
        }
        let registry = self.poll.registry();
        if let Some(c) = self.ports.list[i].capture.as_mut() {
            if let Err(e) = registry.register(c, Token(CAPTURE_BASE + i), Interest::READABLE) {
                error!(
                    "port {}: cannot register capture socket: {e}",
                    self.ports.list[i].name
                );
            }
            // Frames may already be waiting; edge-triggered readiness would not report them.
            self.capture_ready[i] = true;
        }
    }

    fn run_timers(&mut self) {
        let now = Instant::now();
        if now >= self.next_tick {
            self.on_tick();
            self.next_tick += TICK;
            if self.next_tick <= now {
                // Fell behind (suspended, or a slow machine): skip, do not burst.
                self.next_tick = now + TICK;
            }
        }
        if self.eval_at.is_some_and(|t| now >= t) {
            self.eval_at = None;
            self.evaluate(now);
        }
        if matches!(self.ports.target, Target::Ports(_)) && now >= self.next_learning {
            self.send_learning_frames();
            self.next_learning =
                now + Duration::from_secs(self.settings.steering.learning_interval_secs);
        }
        let now_ms = self.now_ms();
        let due = self.steering.take_due(now);
        for mac in due {
            self.send_update(mac, now_ms);
        }
    }

    fn on_tick(&mut self) {
        self.tick += 1;
        self.table.roll_over(self.tick);
        if let Err(e) = self.nl.request_links() {
            warn!("cannot request link counters: {e}");
        }
        self.eval_at = Some(Instant::now() + EVAL_DELAY);
        for p in self.ports.list.iter_mut().filter(|p| p.present) {
            if let Some(c) = &p.capture {
                match c.stats() {
                    Ok(s) if s.drops > p.ring_drops => {
                        warn!(
                            "port {}: capture ring dropped {} frames",
                            p.name,
                            s.drops - p.ring_drops
                        );
                        p.ring_drops = s.drops;
                    }
                    Ok(_) => {}
                    Err(e) => debug!("port {}: cannot read ring statistics: {e}", p.name),
                }
            }
        }
        let idle = self.settings.capture.idle_timeout_secs;
        let table = &self.table;
        self.steering
            .forget_idle(self.tick, idle, |mac| table.get(mac).is_some());
        if self.watchdog {
            setup::sd_notify("WATCHDOG=1");
        }
        if self.tick % 10 == 0 {
            setup::sd_notify(&format!("STATUS={}", self.summary()));
        }
    }

    fn read_netlink(&mut self) {
        let mut events = Vec::new();
        match self.nl.read_batch(NETLINK_BATCH, &mut events) {
            Ok(more) => {
                self.nl_ready = more;
                self.nl_errors = 0;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => self.nl_ready = false,
            Err(e) => {
                warn!("netlink: {e}");
                // More may be queued behind a failed dump, but an error that repeats must not
                // spin the loop: after a few, wait for the socket to report readiness again.
                self.nl_errors += 1;
                self.nl_ready = self.nl_errors < 8;
            }
        }
        let mut links_changed = false;
        let now = Instant::now();
        for ev in events {
            match ev {
                NlEvent::Link(l) => {
                    if let (Some(i), Some(rx)) = (self.ports.by_ifindex(l.index), l.rx_bytes) {
                        self.ports.list[i].record_counter(now, rx);
                    }
                    let old = self.links.insert(l.index, l.clone());
                    links_changed |= old.is_none_or(|o| link_shape_changed(&o, &l));
                }
                NlEvent::LinkRemoved { index, .. } => {
                    links_changed |= self.links.remove(&index).is_some();
                }
                NlEvent::Neigh(n) => self.on_neigh(n, true),
                NlEvent::NeighRemoved(n) => self.on_neigh(n, false),
                NlEvent::Addr(a) => match a.network {
                    ipnetwork::IpNetwork::V4(n) => {
                        if !self.addrs.contains(&(a.ifindex, n)) {
                            self.addrs.push((a.ifindex, n));
                        }
                    }
                    ipnetwork::IpNetwork::V6(n) => {
                        if !self.addrs6.contains(&(a.ifindex, n.ip())) {
                            self.addrs6.push((a.ifindex, n.ip()));
                        }
                    }
                },
                NlEvent::AddrRemoved(a) => match a.network {
                    ipnetwork::IpNetwork::V4(n) => self.addrs.retain(|x| *x != (a.ifindex, n)),
                    ipnetwork::IpNetwork::V6(n) => {
                        self.addrs6.retain(|x| *x != (a.ifindex, n.ip()))
                    }
                },
                NlEvent::DumpDone => {}
                NlEvent::Overrun => {
                    warn!("netlink: kernel dropped notifications; dumping links, addresses and neighbours again");
                    for r in [
                        RouteSocket::request_links,
                        RouteSocket::request_addresses,
                        RouteSocket::request_neighbours,
                    ] {
                        if let Err(e) = r(&mut self.nl) {
                            warn!("netlink re-dump: {e}");
                        }
                    }
                }
            }
        }
        if links_changed {
            self.sync_ports();
        }
    }

    fn on_neigh(&mut self, n: crate::netlink::NeighEntry, present: bool) {
        let mac = n.mac.filter(|_| present && n.is_confirmed());
        match (n.ip, mac) {
            (std::net::IpAddr::V4(ip), Some(mac)) => {
                self.neigh.insert((n.ifindex, ip), mac);
            }
            (std::net::IpAddr::V4(ip), None) => {
                self.neigh.remove(&(n.ifindex, ip));
            }
            (std::net::IpAddr::V6(ip), Some(mac)) => {
                self.neigh6.insert((n.ifindex, ip), mac);
            }
            (std::net::IpAddr::V6(ip), None) => {
                self.neigh6.remove(&(n.ifindex, ip));
            }
        }
    }

    fn sync_ports(&mut self) {
        let changes = self.ports.sync(&self.links);
        if changes.is_empty() {
            return;
        }
        for (i, e) in self.ports.open_captures() {
            error!("port {}: cannot capture: {e}", self.ports.list[i].name);
        }
        let mut refilter = false;
        let mut down = Vec::new();
        for c in &changes {
            match *c {
                ports::Change::Added(i) => {
                    info!(
                        "port {} (ifindex {}) added, MAC {}",
                        self.ports.list[i].name, self.ports.list[i].ifindex, self.ports.list[i].mac
                    );
                    self.register_capture(i);
                    refilter = true;
                    if !self.ports.list[i].up {
                        down.push(i);
                    }
                }
                ports::Change::Removed(i) => {
                    warn!("port {} removed", self.ports.list[i].name);
                    self.capture_ready[i] = false;
                    down.push(i);
                    refilter = true;
                }
                ports::Change::Down(i) => {
                    warn!("port {} is down", self.ports.list[i].name);
                    down.push(i);
                }
                ports::Change::Up(i) => info!("port {} is up", self.ports.list[i].name),
                ports::Change::MacChanged { port, .. } => {
                    refilter = true;
                    self.reassert_port(port);
                }
            }
        }
        if refilter {
            self.ports.refilter();
        }
        if !down.is_empty() {
            self.failover(&down);
        }
    }

    fn read_capture(&mut self, i: usize) {
        let tick = self.tick;
        let port = i as u16;
        // Reused across calls: the hot path allocates nothing per frame or per wakeup.
        let mut arps = std::mem::take(&mut self.arp_buf);
        let table = &mut self.table;
        let Some(cap) = self.ports.list[i].capture.as_mut() else {
            self.capture_ready[i] = false;
            return;
        };
        let n = cap.drain(CAPTURE_BATCH, |meta, bytes| match parse(bytes) {
            // A frame for another port's MAC flooded here (promiscuous port, a switch that
            // forgot a MAC) is not this port's load.
            Some(Frame::Ipv4 {
                src_mac,
                src_ip,
                dst_ip,
                ..
            }) if meta.pkt_type == crate::capture::PACKET_HOST => {
                table.account(src_mac, src_ip, dst_ip, port, meta.orig_len, tick);
            }
            Some(Frame::Ipv6 {
                src_mac,
                src_ip,
                dst_ip,
                ..
            }) if meta.pkt_type == crate::capture::PACKET_HOST => {
                table.account_v6(src_mac, src_ip, dst_ip, port, meta.orig_len, tick);
            }
            Some(f @ (Frame::Arp { .. } | Frame::Nd { .. })) => {
                // ARP and Neighbor Discovery are rare; a flood of them is bounded by the batch.
                arps.push((f, meta.is_outgoing()));
            }
            _ => {}
        });
        self.capture_ready[i] = n >= CAPTURE_BATCH || cap.pending();
        for (f, outgoing) in arps.drain(..) {
            if matches!(f, Frame::Nd { .. }) {
                self.on_nd(f, outgoing);
            } else {
                self.on_arp(f, outgoing);
            }
        }
        self.arp_buf = arps;
    }

    fn send_learning_frames(&mut self) {
        for p in self.ports.list.iter().filter(|p| p.usable()) {
            if let Some(c) = &p.capture {
                if let Err(e) = c.send(&crate::steer::learning_frame(p.mac)) {
                    debug!("port {}: learning frame not sent: {e}", p.name);
                }
            }
        }
    }

    fn reload_config(&mut self) {
        match (self.reload)() {
            Ok(new) => {
                if new.target != self.settings.target && new.target.is_some() {
                    warn!("SIGHUP: the bond or ports changed in the configuration; restart rlbd to apply that");
                }
                if (new.policy.window, new.policy.hits)
                    != (self.settings.policy.window, self.settings.policy.hits)
                {
                    for p in self.ports.list.iter_mut() {
                        p.detector = policy::Detector::new(new.policy.window, new.policy.hits);
                    }
                    self.ports.window = new.policy.window;
                    self.ports.hits = new.policy.hits;
                }
                self.ports.capacity_mbps = new
                    .capacity_mbps
                    .iter()
                    .map(|(k, v)| (k.clone(), *v))
                    .collect();
                for i in 0..self.ports.list.len() {
                    let name = self.ports.list[i].name.clone();
                    if let Some(c) = self.ports.capacity_of(&name) {
                        self.ports.list[i].capacity_bps = c;
                    }
                }
                self.steering.reconfigure(&new.steering);
                log::set_max_level(new.log_level.parse().unwrap_or(log::LevelFilter::Info));
                self.settings = Settings {
                    target: self.settings.target.clone(),
                    ..new
                };
                info!("SIGHUP: configuration reloaded; state kept");
            }
            Err(e) => error!("SIGHUP: configuration not reloaded: {e}"),
        }
    }
}

/// True when a link notification changes what the port list depends on (not just counters).
fn link_shape_changed(a: &LinkInfo, b: &LinkInfo) -> bool {
    a.name != b.name
        || a.mac != b.mac
        || a.admin_up != b.admin_up
        || a.oper_up != b.oper_up
        || a.master != b.master
        || a.kind != b.kind
        || a.bond != b.bond
}
