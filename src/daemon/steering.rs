//! Which clients rlbd moved, where, and the sends that keep them there: the first update and its
//! repeats, re-assertions after the kernel's own ARP or Neighbor Discovery, and failover.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use log::{debug, info, warn};

use super::Daemon;
use crate::capture::Frame;
use crate::config::SteeringConfig;
use crate::netlink::Mac;
use crate::policy::{Move, Reason};
use crate::steer::{
    at_risk, nd_at_risk, neighbor_advertisement, steering_update, ArpSeen, Limiter, NdSeen,
};

#[derive(Debug, Clone)]
pub struct Moved {
    pub port: usize,
    /// The client's address, for the log: IPv4 when it has a confirmed one, else IPv6.
    pub client_ip: IpAddr,
    /// The server address claimed toward it with ARP; `None` for a client moved for IPv6 only.
    pub server_ip: Option<Ipv4Addr>,
    pub at_tick: u64,
    pub reason: Reason,
    pub reasserts: u64,
}

pub struct Steering {
    moved: HashMap<Mac, Moved>,
    /// Sends waiting for their time; small (a few per move or re-assertion), bounded below.
    pending: Vec<(Instant, Mac)>,
    cfg: SteeringConfig,
    pub limiter: Limiter,
    pub reasserts: u64,
    max_moved: usize,
}

/// Sends queued at most; past it a re-assertion storm is shed, not buffered.
const MAX_PENDING: usize = 65_536;

impl Steering {
    pub fn new(cfg: &SteeringConfig, max_clients: usize) -> Self {
        Self {
            moved: HashMap::new(),
            pending: Vec::new(),
            cfg: cfg.clone(),
            limiter: Limiter::new(cfg.per_client_per_sec, cfg.total_per_sec, max_clients),
            reasserts: 0,
            max_moved: max_clients,
        }
    }

    pub fn reconfigure(&mut self, cfg: &SteeringConfig) {
        if cfg.per_client_per_sec != self.cfg.per_client_per_sec
            || cfg.total_per_sec != self.cfg.total_per_sec
        {
            let (sent, suppressed) = (self.limiter.sent, self.limiter.suppressed);
            self.limiter = Limiter::new(cfg.per_client_per_sec, cfg.total_per_sec, self.max_moved);
            self.limiter.sent = sent;
            self.limiter.suppressed = suppressed;
        }
        self.cfg = cfg.clone();
    }

    pub fn moved_count(&self) -> usize {
        self.moved.len()
    }

    pub fn assigned(&self, mac: &Mac) -> Option<usize> {
        self.moved.get(mac).map(|m| m.port)
    }

    pub fn moved(&self, mac: &Mac) -> Option<&Moved> {
        self.moved.get(mac)
    }

    pub fn held(&self, mac: &Mac, tick: u64, hold_down: u64) -> bool {
        self.moved
            .get(mac)
            .is_some_and(|m| tick.saturating_sub(m.at_tick) < hold_down)
    }

    pub fn describe(&self, mac: &Mac, tick: u64) -> String {
        match self.moved.get(mac) {
            Some(m) => format!(
                ", moved {}s ago ({}), re-asserted {}x",
                tick.saturating_sub(m.at_tick),
                m.reason.as_str(),
                m.reasserts
            ),
            None => String::new(),
        }
    }

    fn schedule(&mut self, mac: Mac, first: Instant, count: u32) {
        let step = Duration::from_millis(self.cfg.repeat_interval_ms);
        for k in 0..count {
            if self.pending.len() >= MAX_PENDING {
                warn!("steering queue full; dropping updates for {}", mac);
                return;
            }
            self.pending.push((first + step * k, mac));
        }
    }

    pub fn next_due(&self) -> Option<Instant> {
        self.pending.iter().map(|(t, _)| *t).min()
    }

    pub fn take_due(&mut self, now: Instant) -> Vec<Mac> {
        let mut due = Vec::new();
        self.pending.retain(|(t, m)| {
            if *t <= now {
                due.push(*m);
                false
            } else {
                true
            }
        });
        due
    }

    /// Drops moves of clients that have left: not in the client table and quiet for `idle`.
    pub fn forget_idle(&mut self, tick: u64, idle: u64, in_table: impl Fn(&Mac) -> bool) {
        self.moved.retain(|mac, m| {
            let keep = in_table(mac) || tick.saturating_sub(m.at_tick) < idle;
            if !keep {
                debug!("forgetting the move of {} ({}): idle", m.client_ip, mac);
            }
            keep
        });
    }
}

impl Daemon {
    /// A confirmed neighbour on the server's interfaces with this MAC, if any: only such clients
    /// are ever sent an update (a spoofed source never is).
    fn confirmed_ip(&self, mac: &Mac) -> Option<Ipv4Addr> {
        self.neigh
            .iter()
            .filter(|((ifx, _), m)| *m == mac && self.ports.host_ifindex(*ifx))
            .map(|((_, ip), _)| *ip)
            .min()
    }

    /// The server address to claim toward a client: the one it talks to when that is ours, else
    /// ours in the client's subnet. Never any address that is not the server's.
    fn server_ip_for(&self, client_ip: Ipv4Addr, talks_to: Option<Ipv4Addr>) -> Option<Ipv4Addr> {
        let ours = |ip: Ipv4Addr| {
            self.addrs
                .iter()
                .any(|(ifx, n)| n.ip() == ip && self.ports.host_ifindex(*ifx))
        };
        if let Some(ip) = talks_to.filter(|ip| ours(*ip)) {
            return Some(ip);
        }
        self.addrs
            .iter()
            .filter(|(ifx, n)| self.ports.host_ifindex(*ifx) && n.contains(client_ip))
            .map(|(_, n)| n.ip())
            .next()
    }

    /// True for one of the server's own IPv6 addresses (on the bond, or on the ports).
    fn ours6(&self, ip: &Ipv6Addr) -> bool {
        self.addrs6
            .iter()
            .any(|(ifx, a)| a == ip && self.ports.host_ifindex(*ifx))
    }

    /// The IPv6 side of a client: (its address, the server's) when its latest IPv6 frame went to
    /// one of the server's own addresses and the kernel's neighbour table confirms its source
    /// address with this MAC. Only then is it ever sent a Neighbor Advertisement.
    fn v6_target(&self, mac: &Mac) -> Option<(Ipv6Addr, Ipv6Addr)> {
        let e = self.table.get(mac)?;
        let (client, server) = (e.ip6?, e.server_ip6?);
        if !self.ours6(&server) {
            return None;
        }
        self.neigh6
            .iter()
            .any(|((ifx, ip), m)| *ip == client && m == mac && self.ports.host_ifindex(*ifx))
            .then_some((client, server))
    }

    pub(super) fn apply_move(&mut self, mac: Mac, m: &Move) {
        let v4 = self.confirmed_ip(&mac).and_then(|client_ip| {
            let talks_to = self.table.get(&mac).map(|e| e.server_ip);
            match self.server_ip_for(client_ip, talks_to) {
                Some(server_ip) => Some((client_ip, server_ip)),
                None => {
                    debug!("{client_ip}: no server IPv4 address to claim toward it");
                    None
                }
            }
        });
        let v6 = self.v6_target(&mac);
        let (client_ip, server_ip) = match (v4, v6) {
            (Some((c, s)), _) => (IpAddr::V4(c), Some(s)),
            (None, Some((c, _))) => (IpAddr::V6(c), None),
            (None, None) => {
                debug!(
                    "not moving {}: no confirmed neighbour entry with a server address to claim",
                    mac
                );
                return;
            }
        };
        if let (IpAddr::V4(_), Some((c6, s6))) = (client_ip, v6) {
            debug!("{client_ip} also talks IPv6 ({c6} -> {s6}): moved for both");
        }
        let (from, to) = (&self.ports.list[m.from], &self.ports.list[m.to]);
        let why = match m.reason {
            Reason::Overload => format!(
                "overload: {} of {} samples over {:.0}% ({})",
                from.detector.hit_count(),
                self.settings.policy.window,
                self.settings.policy.threshold * 100.0,
                from.detector.window_string()
            ),
            Reason::Failover => format!("failover: {} is down", from.name),
            Reason::Placement => {
                "placement: a new client, balance-tlb places none itself".to_string()
            }
        };
        info!(
            "{}move {client_ip} ({}) {} -> {}: {:.1} Mbit/s; {} {:.2}->{:.2}, {} {:.2}->{:.2}; {why}",
            if self.settings.dry_run { "dry run: would " } else { "" },
            mac,
            from.name,
            to.name,
            m.rate_bps / 1e6,
            from.name,
            m.from_util.0,
            m.from_util.1,
            to.name,
            m.to_util.0,
            m.to_util.1,
        );
        *self.moves_total.entry(m.reason).or_default() += 1;
        self.steering.moved.insert(
            mac,
            Moved {
                port: m.to,
                client_ip,
                server_ip,
                at_tick: self.tick,
                reason: m.reason,
                reasserts: 0,
            },
        );
        if self.steering.moved.len() > self.steering.max_moved {
            // Bounded like the client table: the oldest move is forgotten first.
            if let Some(oldest) = self
                .steering
                .moved
                .iter()
                .min_by_key(|(_, v)| v.at_tick)
                .map(|(k, _)| *k)
            {
                self.steering.moved.remove(&oldest);
            }
        }
        let repeats = self.steering.cfg.repeats;
        self.steering.schedule(mac, Instant::now(), repeats);
    }

    /// Sends the update that keeps `mac` where rlbd put it, if the limits allow: the ARP reply
    /// for its IPv4 side and, when it talks IPv6 to one of the server's addresses and is a
    /// confirmed IPv6 neighbour, a Neighbor Advertisement. Each frame counts against the limits.
    pub(super) fn send_update(&mut self, mac: Mac, now_ms: u64) {
        let Some(m) = self.steering.moved.get(&mac) else {
            return;
        };
        let (port_ix, client_ip, server_ip) = (m.port, m.client_ip, m.server_ip);
        if self.ports.list.get(port_ix).is_none_or(|p| !p.usable()) || self.settings.dry_run {
            return;
        }
        let v6 = self.v6_target(&mac);
        let port = &self.ports.list[port_ix];
        let limiter = &mut self.steering.limiter;
        let send = |what: &str, frame: &[u8]| {
            if let Some(c) = &port.capture {
                if let Err(e) = c.send(frame) {
                    warn!("port {}: cannot send {what} to {client_ip}: {e}", port.name);
                }
            }
        };
        if let Some(server_ip) = server_ip {
            if limiter.allow(mac, now_ms) {
                send("update", &steering_update(mac, port.mac, server_ip));
            } else {
                debug!("update to {client_ip} suppressed by the rate limit");
            }
        }
        if let Some((c6, s6)) = v6 {
            if limiter.allow(mac, now_ms) {
                send(
                    "neighbor advertisement",
                    &neighbor_advertisement(mac, c6, port.mac, s6),
                );
            } else {
                debug!("neighbor advertisement to {c6} suppressed by the rate limit");
            }
        }
    }

    fn reassert(&mut self, mac: Mac, why: &str) {
        // One frame often shows up several times (a broadcast on every port, a client's ARP
        // retries): a send already due as soon as this one would be covers them all.
        let due = Instant::now() + Duration::from_millis(self.steering.cfg.reassert_delay_ms);
        if self
            .steering
            .pending
            .iter()
            .any(|(t, m)| *m == mac && *t <= due)
        {
            return;
        }
        let Some(m) = self.steering.moved.get_mut(&mac) else {
            return;
        };
        m.reasserts += 1;
        self.steering.reasserts += 1;
        debug!(
            "re-asserting {} on {}: {why}",
            m.client_ip, self.ports.list[m.port].name
        );
        let delay = Duration::from_millis(self.steering.cfg.reassert_delay_ms);
        // Once now, once a repeat later: the kernel or the driver may send more than one frame.
        self.steering.schedule(mac, Instant::now() + delay, 2);
    }

    /// Re-asserts every client moved onto `port` (its MAC changed: alb swaps MACs).
    pub(super) fn reassert_port(&mut self, port: usize) {
        let macs: Vec<Mac> = self
            .steering
            .moved
            .iter()
            .filter(|(_, m)| m.port == port)
            .map(|(k, _)| *k)
            .collect();
        for mac in macs {
            self.reassert(mac, "the port's MAC changed");
        }
    }

    /// ARP seen on a port: the host's own replies and requests would send a moved client back
    /// to where the kernel or driver wants it; each is answered with a re-assertion.
    pub(super) fn on_arp(&mut self, f: Frame, outgoing: bool) {
        let Frame::Arp {
            eth_src,
            eth_dst,
            op,
            sha,
            ..
        } = f
        else {
            return;
        };
        let seen = ArpSeen {
            outgoing,
            op,
            eth_src,
            eth_dst,
            sha,
        };
        let risks = at_risk(
            &seen,
            |mac| self.assigned_port_mac(mac),
            self.steering.moved.keys().copied(),
        );
        self.reassert_all("ARP", risks.into_iter().map(|(m, r)| (m, r.as_str())));
    }

    /// Neighbor Discovery seen on a port: the IPv6 counterpart of [`on_arp`](Self::on_arp).
    pub(super) fn on_nd(&mut self, f: Frame, outgoing: bool) {
        let Frame::Nd {
            eth_src,
            eth_dst,
            kind,
            target,
            lladdr,
            ..
        } = f
        else {
            return;
        };
        let seen = NdSeen {
            outgoing,
            kind,
            eth_src,
            eth_dst,
            target,
            lladdr,
        };
        let moved = &self.steering.moved;
        let table = &self.table;
        let risks = nd_at_risk(
            &seen,
            |ip| self.ours6(ip),
            |ip| {
                moved
                    .keys()
                    .find(|mac| table.get(mac).is_some_and(|e| e.ip6 == Some(*ip)))
                    .copied()
            },
            |mac| self.assigned_port_mac(mac),
            moved.keys().copied(),
        );
        self.reassert_all(
            "Neighbor Discovery",
            risks.into_iter().map(|(m, r)| (m, r.as_str())),
        );
    }

    /// The current MAC of the port rlbd put `client` on; `None` for a client it did not move.
    fn assigned_port_mac(&self, client: &Mac) -> Option<Mac> {
        self.steering
            .moved
            .get(client)
            .and_then(|m| self.ports.list.get(m.port))
            .map(|p| p.mac)
    }

    fn reassert_all(&mut self, what: &str, risks: impl Iterator<Item = (Mac, &'static str)>) {
        let risks: Vec<_> = risks.collect();
        if risks.len() > 1 {
            debug!(
                "one {what} frame puts {} moved clients at risk; re-asserting them",
                risks.len()
            );
        }
        for (mac, why) in risks {
            self.reassert(mac, why);
        }
    }
}
