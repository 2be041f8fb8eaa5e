//! Once a second: the kernel's counts into the client table, the table rolled over, the ports'
//! counters asked for; 200 ms later, when they are in, the evaluation: counters become rates,
//! rates feed the detectors, the snapshot goes to the steering core's planner, and an
//! overloaded port nothing moved off gets its reason in words. In balance-tlb new clients get
//! their first placement.

use log::Level;

use super::{Engine, Output, Topic, EVAL_DELAY_MS};
use crate::capture::ebpf::Delta;
use crate::host::PortTable;
use crate::host::Talk;
use crate::netlink::BondMode;
use crate::policy::{Move, PolicyConfig, PortView, Reason};
use crate::steer::explain::{self, Facts};
use crate::steer::{ClientSnap, Ctx};

impl Engine {
    pub(super) fn on_second(
        &mut self,
        now: u64,
        counts: &[(usize, Delta)],
        whole: bool,
        ring_drops: bool,
    ) {
        let ours = &self.ours;
        self.table
            .account_kernel_counts(counts, self.schedule.tick, |ip| {
                ours.binary_search(&ip).is_ok()
            });
        self.schedule.tick += 1;
        self.table.roll_over(self.schedule.tick);
        // Only the ports' counters: a dump of every link costs in proportion to the host's links.
        for p in self.ports.list.iter().filter(|p| p.present) {
            self.out
                .push_back(Output::RequestCounters { ifindex: p.ifindex });
        }
        self.schedule.eval_at = Some(now + EVAL_DELAY_MS);
        self.trouble.rates_unreliable = ring_drops || !whole;
        let table = &self.table;
        let before = self.steer.moved_count();
        self.steer
            .forget_idle(now, |key| table.get(key).is_some(), &mut self.actions);
        self.dirty |= self.steer.moved_count() != before;
        // The state file also says the daemon that wrote it was alive lately: a restart takes
        // it over only while it is younger than the hold-down, so it is rewritten well within
        // one while there are moves (a sixth of it, at most every 10 s).
        let every = (self.settings.policy.hold_down / 6).clamp(1, 10);
        self.dirty |= self.schedule.tick % every == 0 && self.steer.moved_count() > 0;
        self.carry_out(now);
        if self.schedule.tick % 10 == 0 {
            let s = self.summary();
            self.out.push_back(Output::Summary(s));
        }
    }

    /// Every client in the table as the steering core wants it, into `self.snaps`; with
    /// `active_only`, only those that sent this second (or sit on a port that is not usable, so
    /// failover still finds them).
    pub(super) fn client_snaps(&mut self, active_only: bool) {
        let ports = &self.ports;
        let usable = |p: usize| ports.list.get(p).is_some_and(|p| p.usable());
        self.snaps.clear();
        self.snaps.extend(
            self.table
                .iter_unordered()
                .filter(|e| (e.port as usize) < ports.list.len())
                .filter(|e| !active_only || e.rate > 0 || !usable(e.port as usize))
                .map(|e| ClientSnap {
                    key: e.key,
                    port: e.port as usize,
                    rate_bps: e.rate as f64 * 8.0,
                    talk: Talk {
                        v4: (!e.ip.is_unspecified()).then_some(e.ip),
                        v6: e.ip6,
                        servers: e.servers,
                    },
                }),
        );
    }

    /// The evaluation step: counters to rates, rates to the detectors, snapshot to the core.
    pub(super) fn evaluate(&mut self, now: u64) {
        let threshold = self.settings.policy.threshold;
        let fresh_ms = EVAL_DELAY_MS * 2;
        for p in self.ports.list.iter_mut() {
            if p.usable() {
                let util = p
                    .compute_rate(now, fresh_ms)
                    .filter(|_| p.capacity_bps > 0.0)
                    .map(|r| r / p.capacity_bps);
                p.detector.push(util, threshold);
            } else {
                p.rx_bps = None;
            }
        }
        let views = self.ports.views();
        if std::mem::take(&mut self.trouble.rates_unreliable) {
            // The rings dropped frames this second: the client rates miss an unknown share, so
            // the split among clients, which every move rests on, is not known. Port loads are
            // exact (kernel counters) and keep feeding the detectors; moves wait for a clean
            // second.
            self.trouble.unreliable_seconds += 1;
            self.log(
                Level::Debug,
                Topic::NoMove,
                "capture ring drops this second: client rates incomplete, no move made on them"
                    .into(),
            );
            return;
        }
        self.client_snaps(true);
        let clients = std::mem::take(&mut self.snaps);
        let ctx = Ctx {
            host: &self.host,
            ports: &self.infos,
        };
        let (ports, policy) = (&self.ports, &self.settings.policy);
        let why = |m: &Move| move_reason(ports, policy, m);
        let out = &mut self.actions;
        self.steer.refresh_claims(now, &clients, &ctx, out);
        let made = self.steer.rebalance(now, &views, &clients, &why, &ctx, out);
        self.carry_out(now);
        self.dirty |= !made.is_empty();
        self.explain_no_move(now, &views, &clients, &made);
        if self.ports.bond_mode == Some(BondMode::BalanceTlb) {
            let before = self.steer.counters().moves_placement;
            self.steer_with(now, |s, now, ctx, out| {
                s.place_new(now, &views, &clients, ctx, out)
            });
            self.dirty |= self.steer.counters().moves_placement != before;
        }
        self.snaps = clients;
    }

    /// "Why did it not move?" is the first question an operator asks: for each overloaded port
    /// nothing moved off, the reason in words, logged when the episode starts (and at debug when
    /// it changes) and kept for the status.
    fn explain_no_move(
        &mut self,
        now: u64,
        views: &[PortView],
        clients: &[ClientSnap],
        made: &[usize],
    ) {
        for (i, v) in views.iter().enumerate() {
            let Some(p) = self.ports.list.get_mut(i) else {
                continue;
            };
            if !v.overloaded || made.contains(&i) {
                if !v.overloaded && p.no_move.take().is_some() {
                    let text = format!("port {}: no longer overloaded", p.name);
                    self.log(Level::Debug, Topic::NoMove, text);
                } else if v.overloaded {
                    p.no_move = None;
                }
                continue;
            }
            let p = &self.ports.list[i];
            let steer = &self.steer;
            let held = |c: &ClientSnap| steer.held(&c.key, now);
            let facts = Facts {
                host: &self.host,
                policy: &self.settings.policy,
                held: &held,
            };
            let why = explain::no_move(i, views, clients, &facts);
            let (window, name) = (p.detector.window_string(), p.name.clone());
            let record = match &p.no_move {
                None => Some((
                    Level::Info,
                    format!(
                        "port {name} overloaded ({window}, {:.2} of capacity) and nothing moved: {why}",
                        v.utilization()
                    ),
                )),
                Some(old) if *old != why => Some((
                    Level::Debug,
                    format!("port {name}: nothing moved: {why}"),
                )),
                Some(_) => None,
            };
            if let Some((level, text)) = record {
                self.log(level, Topic::NoMove, text);
            }
            self.ports.list[i].no_move = Some(why);
        }
    }
}

/// The words of a move's reason: for an overload move, the source port's detector as this
/// second sees it.
fn move_reason(ports: &PortTable, policy: &PolicyConfig, m: &Move) -> String {
    let Some(p) = ports.list.get(m.from) else {
        return "overload".into();
    };
    if m.reason == Reason::Room {
        return format!(
            "room: {} keeps its room in one piece for a client of a saturated port",
            p.name
        );
    }
    format!(
        "overload: {} of {} samples over {:.0}% ({})",
        p.detector.hit_count(),
        policy.window,
        policy.threshold * 100.0,
        p.detector.window_string()
    )
}
