//! The ports rlbd steers among, kept in step with the kernel's link table: bond slaves found by
//! `IFLA_MASTER`, or named plain ports. Indices are stable for the daemon's life, since the
//! client table and the moves refer to ports by index. Pure: the shell opens capture sockets for
//! ports that appear and reads link speeds; times are milliseconds since the daemon started.

use std::collections::HashMap;

use crate::config::Target;
use crate::netlink::{counter_delta, BondMode, LinkInfo, LinkKind};
use crate::policy::{Detector, PortView};
use crate::status::PortState;
use crate::Mac;

/// Two counter readings closer than this are too noisy to make a rate from: the later one
/// replaces the newer reading instead (link notifications carry counters at odd moments).
const MIN_SAMPLE_GAP_MS: u64 = 500;

/// One reading of a port's receive counters: bytes, and packets where the kernel gave them.
#[derive(Debug, Clone, Copy)]
struct Reading {
    at_ms: u64,
    bytes: u64,
    packets: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct Port {
    pub name: String,
    pub ifindex: u32,
    pub mac: Mac,
    pub up: bool,
    pub present: bool,
    /// bit/s; 0 when unknown, which makes the port neither a target nor ever overloaded.
    pub capacity_bps: f64,
    pub detector: Detector,
    prev: Option<Reading>,
    last: Option<Reading>,
    /// This second's receive rate, bit/s; `None` when there was no usable reading.
    pub rx_bps: Option<f64>,
    /// This second's packets a second, over the same interval, where both readings had one.
    pub rx_pps: Option<f64>,
    /// Its sampling ratio: one IPv4/IPv6 packet in this many counted (the shell's, each second).
    pub one_in: u32,
    /// The packets its counting hook saw, as last read, and the rate since the reading before.
    hook: Option<(u64, u64)>,
    pub hook_pps: Option<f64>,
    /// Frames the capture ring dropped, as last reported.
    pub ring_drops: u64,
    /// Bytes of IPv4/IPv6 frames counted for clients on this port since it appeared (scaled
    /// by the sampling ratio): beside the kernel's receive counter, what counting covers.
    pub counted_bytes: u64,
    /// `counted_bytes` when the kernel's counter was last read: the two side by side.
    counted_at_reading: u64,
    /// While it is overloaded and nothing moves off it: why, in words.
    pub no_move: Option<String>,
    /// The link's `IFLA_CARRIER_CHANGES` as last told (a rise while up is a hidden flap).
    pub carrier_changes: Option<u32>,
}

impl Port {
    fn new(link: &LinkInfo, mac: Mac, window: usize, hits: usize) -> Port {
        Port {
            name: link.name.clone(),
            ifindex: link.index,
            mac,
            up: false,
            present: false,
            capacity_bps: 0.0,
            detector: Detector::new(window, hits),
            prev: None,
            last: None,
            rx_bps: None,
            rx_pps: None,
            one_in: 1,
            hook: None,
            hook_pps: None,
            ring_drops: 0,
            counted_bytes: 0,
            counted_at_reading: 0,
            no_move: None,
            carrier_changes: link.carrier_changes,
        }
    }

    pub fn record_counter(&mut self, at_ms: u64, rx_bytes: u64, rx_packets: Option<u64>) {
        self.counted_at_reading = self.counted_bytes;
        let reading = Reading {
            at_ms,
            bytes: rx_bytes,
            packets: rx_packets,
        };
        match self.last {
            // Keep `prev` so the rate spans a real interval.
            Some(r) if at_ms.saturating_sub(r.at_ms) < MIN_SAMPLE_GAP_MS => {}
            _ => self.prev = self.last,
        }
        self.last = Some(reading);
    }

    /// The rate between the last two readings, if the newer one is at most `fresh_ms` old. A
    /// counter that went backwards (reset, wrap, driver reload) gives no rate rather than a spike.
    pub fn compute_rate(&mut self, now_ms: u64, fresh_ms: u64) -> Option<f64> {
        let (rate, pps) = match (self.prev, self.last) {
            (Some(a), Some(b))
                if now_ms.saturating_sub(b.at_ms) <= fresh_ms && b.at_ms > a.at_ms =>
            {
                let per_sec = |d: u64| d as f64 * 1000.0 / (b.at_ms - a.at_ms) as f64;
                let rate = counter_delta(a.bytes, b.bytes).map(|d| per_sec(d) * 8.0);
                let pps = a
                    .packets
                    .zip(b.packets)
                    .and_then(|(p0, p1)| counter_delta(p0, p1));
                (rate, pps.filter(|_| rate.is_some()).map(per_sec))
            }
            _ => (None, None),
        };
        self.rx_pps = pps;
        self.rx_bps = rate;
        rate
    }

    /// The second's sampling at `at_ms`: one packet in `one_in` counted, and the packets its
    /// counting hook has seen (`None`: it counts no packets in the kernel).
    pub fn record_sampling(&mut self, at_ms: u64, one_in: u32, seen: Option<u64>) {
        self.one_in = one_in.max(1);
        self.hook_pps = match (self.hook, seen) {
            (Some((t0, p0)), Some(p1)) if at_ms > t0 => {
                counter_delta(p0, p1).map(|d| d as f64 * 1000.0 / (at_ms - t0) as f64)
            }
            _ => None,
        };
        self.hook = seen.map(|p| (at_ms, p));
    }

    /// Its resolution for the planner: the rate of a few kept packets of its average size at
    /// the counting hook (after GRO, which may merge 40 wire packets into one; the wire's where
    /// the hook's count is unknown), 0 while every packet is counted.
    pub fn resolution_bps(&self) -> f64 {
        match (self.rx_bps, self.hook_pps.or(self.rx_pps)) {
            (Some(bps), Some(pps)) if pps > 0.0 => {
                crate::policy::sampling_resolution_bps(self.one_in, bps / pps)
            }
            _ => 0.0,
        }
    }

    pub fn rx_bytes(&self) -> Option<u64> {
        self.last.map(|r| r.bytes)
    }

    /// The bytes counted for clients up to the kernel counter's last reading ([`Self::rx_bytes`]).
    pub fn counted_bytes_at_reading(&self) -> u64 {
        self.counted_at_reading
    }

    pub fn usable(&self) -> bool {
        self.present && self.up
    }

    pub fn utilization(&self) -> Option<f64> {
        self.rx_bps
            .filter(|_| self.capacity_bps > 0.0)
            .map(|r| r / self.capacity_bps)
    }

    pub fn state(&self) -> PortState {
        if !self.present {
            PortState::Absent
        } else if self.up {
            PortState::Up
        } else {
            PortState::Down
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A port appeared (first time, or back after it was removed): the shell opens its capture
    /// and gives it a capacity.
    Added(usize),
    Removed(usize),
    Down(usize),
    Up(usize),
    MacChanged {
        port: usize,
        old: Mac,
    },
    /// The port is up, as it was, but its carrier went down and came back in between
    /// (`IFLA_CARRIER_CHANGES` rose): a flap the daemon saw no message of.
    Flapped(usize),
    /// The bond (bond mode) appeared with this ifindex.
    BondFound(u32),
    /// The bond (bond mode) is gone or not there yet.
    BondMissing,
}

#[derive(Debug, Clone)]
pub struct PortTable {
    pub list: Vec<Port>,
    pub target: Target,
    /// The bond's ifindex in bond mode, while it exists.
    pub bond_index: Option<u32>,
    /// The bond's mode (`IFLA_BOND_MODE`), while it exists.
    pub bond_mode: Option<BondMode>,
    /// `[capacity]`/`--capacity` overrides, Mbit/s by port name.
    pub capacity_mbps: HashMap<String, f64>,
    pub window: usize,
    pub hits: usize,
    bond_missing_reported: bool,
}

impl PortTable {
    pub fn new(
        target: Target,
        capacity_mbps: HashMap<String, f64>,
        window: usize,
        hits: usize,
    ) -> Self {
        Self {
            list: Vec::new(),
            target,
            bond_index: None,
            bond_mode: None,
            capacity_mbps,
            window,
            hits,
            bond_missing_reported: false,
        }
    }

    /// The MACs of the present ports (the capture filter's destinations).
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

    /// The configured capacity of a port, bit/s, if one is set for its name.
    pub fn capacity_override(&self, name: &str) -> Option<f64> {
        self.capacity_mbps
            .get(name)
            .copied()
            .filter(|m| *m > 0.0)
            .map(|m| m * 1e6)
    }

    /// The planner's view of every port into a buffer the caller keeps (the evaluation's, every
    /// second). `overloaded` is the detector's verdict.
    pub fn views_into(&self, out: &mut Vec<PortView>) {
        out.clear();
        out.extend(self.list.iter().map(|p| PortView {
            capacity_bps: p.capacity_bps,
            up: p.usable(),
            rx_bps: p.rx_bps.unwrap_or(0.0),
            overloaded: p.usable() && p.detector.overloaded(),
            resolution_bps: p.resolution_bps(),
        }));
    }

    /// The links that should be ports now, by name order for ports mode and ifindex for slaves.
    fn desired<'a>(
        &mut self,
        links: &'a HashMap<u32, LinkInfo>,
        changes: &mut Vec<Change>,
    ) -> Vec<&'a LinkInfo> {
        match &self.target {
            Target::Ports(names) => names
                .iter()
                .filter_map(|n| links.values().find(|l| &l.name == n))
                .collect(),
            Target::Bond(name) => {
                let bond = links
                    .values()
                    .find(|l| &l.name == name && l.kind == Some(LinkKind::Bond));
                let Some(b) = bond else {
                    if self.bond_index.take().is_some() || !self.bond_missing_reported {
                        changes.push(Change::BondMissing);
                        self.bond_missing_reported = true;
                    }
                    return Vec::new();
                };
                if self.bond_index != Some(b.index) {
                    changes.push(Change::BondFound(b.index));
                    self.bond_missing_reported = false;
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

    /// Brings the port list in line with the link table; returns what changed.
    pub fn sync(&mut self, links: &HashMap<u32, LinkInfo>) -> Vec<Change> {
        let mut changes = Vec::new();
        let desired = self.desired(links, &mut changes);
        let mut keep = vec![false; self.list.len()];
        for link in desired {
            let Some(mac) = link.mac else { continue };
            let up = link.admin_up && link.oper_up;
            let slot = self
                .list
                .iter()
                .position(|p| p.ifindex == link.index)
                .or_else(|| self.list.iter().position(|p| p.name == link.name));
            let i = slot.unwrap_or_else(|| {
                self.list.push(Port::new(link, mac, self.window, self.hits));
                keep.push(false);
                self.list.len() - 1
            });
            keep[i] = true;
            let p = &mut self.list[i];
            if !p.present || p.ifindex != link.index || p.name != link.name {
                // New, back, or another link under the same name: start afresh.
                *p = Port {
                    ring_drops: p.ring_drops,
                    ..Port::new(link, mac, self.window, self.hits)
                };
                p.present = true;
                p.up = up;
                changes.push(Change::Added(i));
                continue;
            }
            if p.mac != mac {
                changes.push(Change::MacChanged {
                    port: i,
                    old: p.mac,
                });
                p.mac = mac;
            }
            let flips = link.carrier_changes;
            let flapped = flips.zip(p.carrier_changes).is_some_and(|(n, was)| n > was);
            if flips.is_some() {
                p.carrier_changes = flips;
            }
            if p.up != up {
                p.up = up;
                p.detector.reset();
                changes.push(if up { Change::Up(i) } else { Change::Down(i) });
            } else if up && flapped {
                p.detector.reset();
                changes.push(Change::Flapped(i));
            }
        }
        for (i, kept) in keep.iter().enumerate() {
            if !kept && self.list[i].present {
                let p = &mut self.list[i];
                p.present = false;
                p.up = false;
                p.rx_bps = None;
                changes.push(Change::Removed(i));
            }
        }
        changes
    }

    /// New overload window settings (a reload): every detector starts over.
    pub fn set_window(&mut self, window: usize, hits: usize) {
        if (window, hits) != (self.window, self.hits) {
            self.window = window;
            self.hits = hits;
            for p in &mut self.list {
                p.detector = Detector::new(window, hits);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(index: u32, name: &str, master: Option<u32>, up: bool) -> LinkInfo {
        LinkInfo {
            index,
            name: name.into(),
            mac: Some(Mac(2, 0, 0, 0, 1, index as u8)),
            admin_up: true,
            oper_up: up,
            master,
            kind: if name.starts_with("bond") {
                Some("bond".into())
            } else {
                None
            },
            ..LinkInfo::default()
        }
    }

    fn table(links: &[LinkInfo]) -> HashMap<u32, LinkInfo> {
        links.iter().map(|l| (l.index, l.clone())).collect()
    }

    #[test]
    fn slaves_come_and_go_with_stable_indices() {
        let mut t = PortTable::new(Target::Bond("bond0".into()), HashMap::new(), 3, 2);
        let bond = link(1, "bond0", None, true);
        let (a, b) = (
            link(2, "eth0", Some(1), true),
            link(3, "eth1", Some(1), true),
        );
        let c = t.sync(&table(&[bond.clone(), a.clone(), b.clone()]));
        assert_eq!(
            c,
            vec![Change::BondFound(1), Change::Added(0), Change::Added(1)]
        );
        let c = t.sync(&table(&[bond.clone(), b.clone()]));
        assert_eq!(c, vec![Change::Removed(0)]);
        let mut b_down = b.clone();
        b_down.oper_up = false;
        assert_eq!(
            t.sync(&table(&[bond.clone(), b_down])),
            vec![Change::Down(1)]
        );
        // eth0 comes back with a new ifindex: same slot.
        let a2 = link(7, "eth0", Some(1), true);
        let c = t.sync(&table(&[bond.clone(), a2, b.clone()]));
        assert_eq!(
            c,
            vec![Change::Up(1), Change::Added(0)],
            "slaves in ifindex order"
        );
        assert_eq!(t.list[0].ifindex, 7);
        let mut b_mac = b;
        b_mac.mac = Some(Mac(2, 0, 0, 0, 9, 9));
        let c = t.sync(&table(&[bond, link(7, "eth0", Some(1), true), b_mac]));
        assert_eq!(
            c,
            vec![Change::MacChanged {
                port: 1,
                old: Mac(2, 0, 0, 0, 1, 3)
            }]
        );
    }

    #[test]
    fn a_missing_bond_is_reported_once() {
        let mut t = PortTable::new(Target::Bond("bond0".into()), HashMap::new(), 3, 2);
        assert_eq!(t.sync(&HashMap::new()), vec![Change::BondMissing]);
        assert_eq!(t.sync(&HashMap::new()), vec![]);
        let bond = link(1, "bond0", None, true);
        assert_eq!(t.sync(&table(&[bond])), vec![Change::BondFound(1)]);
        assert_eq!(t.sync(&HashMap::new()), vec![Change::BondMissing]);
    }

    #[test]
    fn rates_span_real_intervals_and_refuse_resets() {
        let mut t = PortTable::new(Target::Ports(vec!["p0".into()]), HashMap::new(), 3, 2);
        t.sync(&table(&[link(2, "p0", None, true)]));
        let p = &mut t.list[0];
        p.record_counter(0, 1_000, None);
        p.record_counter(1000, 126_000, None);
        // A notification 100 ms later replaces the newer reading, keeping a 1.1 s interval.
        p.record_counter(1100, 138_500, None);
        let r = p.compute_rate(1200, 400).unwrap();
        assert!((r - 1_000_000.0).abs() < 1.0, "{r}");
        assert_eq!(p.compute_rate(2000, 400), None, "stale");
        p.record_counter(2100, 5, None);
        assert_eq!(p.compute_rate(2100, 400), None, "counter went backwards");
    }

    /// A sampled port's resolution: 8 kept packets of its average size a second, from the
    /// packet counter beside the byte counter; nothing while it counts every packet.
    #[test]
    fn a_sampled_port_has_a_resolution_from_its_packet_size() {
        let mut t = PortTable::new(Target::Ports(vec!["p0".into()]), HashMap::new(), 3, 2);
        t.sync(&table(&[link(2, "p0", None, true)]));
        let p = &mut t.list[0];
        p.record_counter(0, 0, Some(0));
        p.record_counter(1000, 64_000_000, Some(1_000_000));
        p.compute_rate(1000, 400).unwrap();
        assert_eq!(p.rx_pps, Some(1_000_000.0));
        assert_eq!(p.resolution_bps(), 0.0, "every packet counted");
        p.one_in = 32;
        assert_eq!(p.resolution_bps(), 8.0 * 32.0 * 512.0);
        let mut views = Vec::new();
        t.views_into(&mut views);
        assert_eq!(views[0].resolved(100_000.0), 0.0);
        assert_eq!(views[0].resolved(200_000.0), 200_000.0);
        // Under GRO the hook sees 40 wire packets as one: the kept packet weighs 40 times more.
        let p = &mut t.list[0];
        p.record_sampling(1000, 32, Some(0));
        p.record_sampling(2000, 32, Some(25_000));
        assert_eq!(p.hook_pps, Some(25_000.0));
        assert_eq!(p.resolution_bps(), 8.0 * 32.0 * 512.0 * 40.0);
        // No packet counter anywhere: no resolution (the rate is taken as read).
        p.record_sampling(3000, 1, None);
        p.record_counter(2000, 128_000_000, None);
        p.compute_rate(2000, 400).unwrap();
        assert_eq!((p.rx_pps, p.resolution_bps()), (None, 0.0));
    }
}
