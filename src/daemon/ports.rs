//! The ports rlbd steers among, kept in step with the kernel's link table: bond slaves found by
//! `IFLA_MASTER`, or named plain ports. Indices are stable for the daemon's life, since the
//! client table and the moves refer to ports by index.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use log::{error, info, warn};

use crate::capture::{CaptureSocket, RingConfig};
use crate::config::Target;
use crate::netlink::{counter_delta, BondMode, LinkInfo, Mac};
use crate::policy::Detector;

/// Two counter readings closer than this are too noisy to make a rate from: the later one
/// replaces the newer reading instead (link notifications carry counters at odd moments).
const MIN_SAMPLE_GAP: Duration = Duration::from_millis(500);

pub struct Port {
    pub name: String,
    pub ifindex: u32,
    pub mac: Mac,
    pub up: bool,
    pub present: bool,
    /// bit/s; 0 when unknown, which makes the port neither a target nor ever overloaded.
    pub capacity_bps: f64,
    pub capture: Option<CaptureSocket>,
    pub detector: Detector,
    prev: Option<(Instant, u64)>,
    last: Option<(Instant, u64)>,
    /// This second's receive rate, bit/s; `None` when there was no usable reading.
    pub rx_bps: Option<f64>,
    pub ring_drops: u64,
}

impl Port {
    pub fn record_counter(&mut self, at: Instant, rx_bytes: u64) {
        match self.last {
            Some((t, _)) if at.duration_since(t) < MIN_SAMPLE_GAP => {
                self.last = Some((at, rx_bytes));
                // Keep `prev` so the rate spans a real interval.
            }
            _ => {
                self.prev = self.last;
                self.last = Some((at, rx_bytes));
            }
        }
    }

    /// The rate between the last two readings, if the newer one is fresh. A counter that went
    /// backwards (reset, wrap, driver reload) gives no rate rather than a spike.
    pub fn compute_rate(&mut self, now: Instant, fresh: Duration) -> Option<f64> {
        let rate = match (self.prev, self.last) {
            (Some((t0, b0)), Some((t1, b1))) if now.duration_since(t1) <= fresh && t1 > t0 => {
                counter_delta(b0, b1).map(|d| d as f64 * 8.0 / t1.duration_since(t0).as_secs_f64())
            }
            _ => None,
        };
        self.rx_bps = rate;
        rate
    }

    pub fn rx_bytes(&self) -> Option<u64> {
        self.last.map(|(_, b)| b)
    }

    pub fn usable(&self) -> bool {
        self.present && self.up
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Added(usize),
    Removed(usize),
    Down(usize),
    Up(usize),
    MacChanged { port: usize, old: Mac },
}

pub struct Ports {
    pub list: Vec<Port>,
    pub target: Target,
    /// The bond's ifindex in bond mode, while it exists.
    pub bond_index: Option<u32>,
    /// The bond's mode (`IFLA_BOND_MODE`), while it exists.
    pub bond_mode: Option<BondMode>,
    pub capacity_mbps: HashMap<String, f64>,
    pub ring: RingConfig,
    pub window: usize,
    pub hits: usize,
    bond_missing_logged: bool,
}

impl Ports {
    pub fn new(
        target: Target,
        capacity_mbps: HashMap<String, f64>,
        ring: RingConfig,
        window: usize,
        hits: usize,
    ) -> Self {
        Self {
            list: Vec::new(),
            target,
            bond_index: None,
            bond_mode: None,
            capacity_mbps,
            ring,
            window,
            hits,
            bond_missing_logged: false,
        }
    }

    /// Interfaces whose addresses and neighbours belong to the server: the bond, or the ports.
    pub fn host_ifindex(&self, ifindex: u32) -> bool {
        match self.target {
            Target::Bond(_) => Some(ifindex) == self.bond_index,
            Target::Ports(_) => self.list.iter().any(|p| p.present && p.ifindex == ifindex),
        }
    }

    pub fn macs(&self) -> Vec<Mac> {
        self.list
            .iter()
            .filter(|p| p.present)
            .map(|p| p.mac)
            .collect()
    }

    pub fn by_ifindex(&self, ifindex: u32) -> Option<usize> {
        self.list
            .iter()
            .position(|p| p.present && p.ifindex == ifindex)
    }

    pub fn capacity_of(&self, name: &str) -> Option<f64> {
        self.capacity_mbps
            .get(name)
            .copied()
            .or_else(|| crate::netlink::link_speed_mbps(name).map(|m| m as f64))
            .filter(|m| *m > 0.0)
            .map(|m| m * 1e6)
    }

    /// The links that should be ports now, by name order for ports mode and ifindex for slaves.
    fn desired<'a>(&mut self, links: &'a HashMap<u32, LinkInfo>) -> Vec<&'a LinkInfo> {
        match &self.target {
            Target::Ports(names) => names
                .iter()
                .filter_map(|n| links.values().find(|l| &l.name == n))
                .collect(),
            Target::Bond(name) => {
                let bond = links
                    .values()
                    .find(|l| &l.name == name && l.kind.as_deref() == Some("bond"));
                match bond {
                    None => {
                        if self.bond_index.take().is_some() || !self.bond_missing_logged {
                            warn!("bond {name} is gone; waiting for it to return");
                            self.bond_missing_logged = true;
                        }
                        Vec::new()
                    }
                    Some(b) => {
                        if self.bond_index != Some(b.index) {
                            info!("bond {name} (ifindex {}) found", b.index);
                            self.bond_missing_logged = false;
                        }
                        self.bond_index = Some(b.index);
                        self.bond_mode = b.bond.as_ref().map(|i| i.mode);
                        let mut slaves: Vec<&LinkInfo> = links
                            .values()
                            .filter(|l| l.master == Some(b.index))
                            .collect();
                        slaves.sort_by_key(|l| l.index);
                        slaves
                    }
                }
            }
        }
    }

    /// Brings the port list in line with the link table; returns what changed.
    pub fn sync(&mut self, links: &HashMap<u32, LinkInfo>) -> Vec<Change> {
        let mut changes = Vec::new();
        let desired = self.desired(links);
        let mut keep = vec![false; self.list.len()];
        for link in desired {
            let Some(mac) = link.mac else { continue };
            let up = link.admin_up && link.oper_up;
            let slot = self
                .list
                .iter()
                .position(|p| p.ifindex == link.index)
                .or_else(|| self.list.iter().position(|p| p.name == link.name));
            let i = match slot {
                Some(i) => i,
                None => {
                    self.list.push(Port {
                        name: link.name.clone(),
                        ifindex: link.index,
                        mac,
                        up: false,
                        present: false,
                        capacity_bps: 0.0,
                        capture: None,
                        detector: Detector::new(self.window, self.hits),
                        prev: None,
                        last: None,
                        rx_bps: None,
                        ring_drops: 0,
                    });
                    keep.push(false);
                    self.list.len() - 1
                }
            };
            keep[i] = true;
            let reopen = !self.list[i].present
                || self.list[i].ifindex != link.index
                || self.list[i].name != link.name;
            if reopen {
                let capacity = self.capacity_of(&link.name);
                let p = &mut self.list[i];
                p.name = link.name.clone();
                p.ifindex = link.index;
                p.mac = mac;
                p.present = true;
                p.up = up;
                p.prev = None;
                p.last = None;
                p.detector.reset();
                p.capacity_bps = capacity.unwrap_or(0.0);
                if capacity.is_none() {
                    error!("port {}: no capacity (the link reports no speed); set it with --capacity {}=MBIT", p.name, p.name);
                }
                p.capture = None;
                changes.push(Change::Added(i));
                continue;
            }
            let p = &mut self.list[i];
            if p.mac != mac {
                let old = p.mac;
                info!("port {}: MAC {} -> {}", p.name, old, mac);
                p.mac = mac;
                changes.push(Change::MacChanged { port: i, old });
            }
            if p.up != up {
                p.up = up;
                p.detector.reset();
                changes.push(if up { Change::Up(i) } else { Change::Down(i) });
            }
        }
        for (i, kept) in keep.iter().enumerate() {
            if !kept && self.list[i].present {
                let p = &mut self.list[i];
                p.present = false;
                p.up = false;
                p.capture = None;
                p.rx_bps = None;
                changes.push(Change::Removed(i));
            }
        }
        changes
    }

    /// Opens the capture socket of every present port that lacks one; errors name the port.
    pub fn open_captures(&mut self) -> Vec<(usize, std::io::Error)> {
        let macs = self.macs();
        let mut errors = Vec::new();
        for (i, p) in self.list.iter_mut().enumerate() {
            if p.present && p.capture.is_none() {
                match CaptureSocket::open(&p.name, p.ifindex, &macs, &self.ring) {
                    Ok(c) => p.capture = Some(c),
                    Err(e) => errors.push((i, e)),
                }
            }
        }
        errors
    }

    /// Re-filters every capture socket for the current set of MACs.
    pub fn refilter(&self) {
        let macs = self.macs();
        for p in self.list.iter().filter(|p| p.present) {
            if let Some(c) = &p.capture {
                if let Err(e) = c.set_macs(&macs) {
                    error!("port {}: cannot update capture filter: {e}", p.name);
                }
            }
        }
    }
}
