//! The engine's view of the server's network: the kernel's links, addresses and neighbours (the
//! host view), the ports among them, and what the capture path and the steering core need of
//! them. Netlink events change it; a change of the ports comes back for the steering core
//! ([`PortChanges`]) and for the shell (open or close a capture, re-filter, re-dump).

use std::net::IpAddr;
use std::sync::Arc;

use log::Level;

use super::io::{Output, PortId, PortRef, Topic};
use super::outbox::Outbox;
use crate::config::{Settings, Target};
use crate::host::{Change, HostView, PortTable};
use crate::logging::Fields;
use crate::netlink::NlEvent;
use crate::steer::{Ctx, PortInfo};

/// Ports that went down or away, whether one came up, and ports whose MAC changed.
#[derive(Debug, Default)]
pub struct PortChanges {
    pub down: Vec<usize>,
    pub up: bool,
    /// Ports whose carrier went down and came back unseen: just back up.
    pub flapped: Vec<usize>,
    /// Each with its old MAC.
    pub macs: Vec<(usize, crate::Mac)>,
    /// Ports whose capture was closed (they went away).
    pub closed: Vec<usize>,
}

/// The dumps an overrun's `Output::Redump` asks the reader for (links, addresses, neighbours,
/// the FDB: `daemon::netlink::NetlinkReader::redump`), each ended by a `DumpDone`.
const REDUMP_DUMPS: u8 = 4;

/// An overrun's re-dump under way: since when, and the `DumpDone`s still to come.
#[derive(Debug, Clone, Copy)]
struct Resync {
    since: u64,
    left: u8,
}

pub struct Lan {
    pub host: HostView,
    pub ports: PortTable,
    /// The server's addresses, sorted (copied from the host view on change: asked per frame).
    ours: Vec<IpAddr>,
    /// Interfaces on the bond already reported as not steerable.
    unsupported_seen: Vec<String>,
    /// Netlink overruns seen (each answered with a re-dump).
    pub resyncs: u64,
    /// The re-dump of the latest overrun, while not all in.
    resync: Option<Resync>,
    /// The steering core's view of the ports, rebuilt when a port changes (not per call).
    infos: Vec<PortInfo>,
    /// Each port named completely, for the outputs (rebuilt when a port changes).
    refs: Vec<PortRef>,
    /// The MACs of the server's interfaces on the bond that are no port's: frames to them are
    /// the server's load too (as last handed out).
    host_macs: Vec<crate::Mac>,
    /// Ports whose MAC another port has just taken, until their own new MAC is told: a swap
    /// told in two messages (see `refresh_infos`).
    stale_mac: Vec<bool>,
}

impl Lan {
    pub fn new(settings: &Settings, target: Target) -> Lan {
        let capacity = settings
            .capacity_mbps
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let ports = PortTable::new(
            target.clone(),
            capacity,
            settings.policy.window,
            settings.policy.hits,
        );
        Lan {
            host: HostView::new(target),
            ports,
            ours: Vec::new(),
            unsupported_seen: Vec::new(),
            resyncs: 0,
            resync: None,
            infos: Vec::new(),
            refs: Vec::new(),
            host_macs: Vec::new(),
            stale_mac: Vec::new(),
        }
    }

    /// What the steering core may look at.
    pub fn ctx(&self) -> Ctx<'_> {
        Ctx {
            host: &self.host,
            ports: &self.infos,
            resync_since: self.resync.map(|r| r.since),
        }
    }

    pub fn is_ours(&self, ip: IpAddr) -> bool {
        self.ours.binary_search(&ip).is_ok()
    }

    pub fn port_name(&self, port: usize) -> String {
        self.ports
            .list
            .get(port)
            .map_or_else(|| "?".into(), |p| p.name.clone())
    }

    /// Port `port` named completely (`None`: no such port).
    pub fn port_ref(&self, port: usize) -> Option<PortRef> {
        self.refs.get(port).cloned()
    }

    /// Every port named completely, by index.
    pub fn refs(&self) -> &[PortRef] {
        &self.refs
    }

    /// Whether a frame a port handed over is the server's load: the kernel said it was for
    /// this host (the port's own MAC), or it is for one of the server's other MACs (a
    /// macvlan's, a bridge's own), which reach the port as another host's. A frame for
    /// another port's MAC flooded here (a promiscuous port, a switch that forgot a MAC) is not
    /// this port's load.
    pub fn is_host_frame(&self, for_host: bool, dst_mac: crate::Mac) -> bool {
        for_host || self.host_macs.contains(&dst_mac)
    }

    /// Applies one batch of netlink events; the port changes are the caller's to act on.
    pub fn apply(&mut self, now: u64, events: &[NlEvent], out: &mut Outbox) -> PortChanges {
        let mut links_changed = false;
        let mut addrs_changed = false;
        for ev in events {
            addrs_changed |= matches!(ev, NlEvent::Addr(_) | NlEvent::AddrRemoved(_));
            if let NlEvent::Link(l) = ev {
                if let (Some(i), Some(rx)) = (self.ports.by_ifindex(l.index), l.rx_bytes) {
                    self.ports.list[i].record_counter(now, rx, l.rx_packets);
                }
            }
            if matches!(ev, NlEvent::DumpDone) {
                self.dump_done();
            }
            if matches!(ev, NlEvent::Overrun) {
                self.resyncs += 1;
                self.resync = Some(Resync {
                    since: now,
                    left: REDUMP_DUMPS,
                });
                out.log(
                    Level::Warn,
                    Topic::Host,
                    "netlink: kernel dropped notifications; dumping links, addresses and neighbours again".into(),
                );
                out.push(Output::Redump);
            }
            links_changed |= self.host.apply(ev).links;
        }
        let changes = if links_changed {
            self.sync_ports(out)
        } else {
            PortChanges::default()
        };
        if links_changed || addrs_changed {
            self.refresh_host(out);
        }
        changes
    }

    /// A dump is in: the last of a re-dump's makes the host view whole again.
    fn dump_done(&mut self) {
        if let Some(r) = &mut self.resync {
            r.left -= 1;
            if r.left == 0 {
                self.resync = None;
            }
        }
    }

    /// The server's addresses, copied once per change rather than asked per frame; shapes on
    /// the bond that rlbd cannot steer, appearing while it runs, reported once each.
    fn refresh_host(&mut self, out: &mut Outbox) {
        self.ours = self.host.our_addresses().collect();
        self.ours.sort();
        self.ours.dedup();
        let of_ports = self.ports.macs();
        let mut macs = self.host.host_macs();
        macs.retain(|m| !of_ports.contains(m));
        if macs != self.host_macs {
            self.host_macs = macs;
            out.push(Output::HostMacs(self.host_macs.clone()));
            self.warn_macs(out);
        }
        for (name, why) in self.host.unsupported() {
            if !self.unsupported_seen.contains(name) {
                let text = format!("interface {name} is not steered: {why}");
                out.log(Level::Error, Topic::Host, text);
                self.unsupported_seen.push(name.clone());
            }
        }
    }

    /// More MACs than a capture filter holds: the shell keeps the first ones.
    fn warn_macs(&self, out: &mut Outbox) {
        let n = self.ports.macs().len() + self.host_macs.len();
        let max = crate::capture::filter::MAX_MACS;
        if n > max {
            let text = format!(
                "{n} MACs to capture for, more than a filter holds ({max}): frames to the last \
                 ones are not counted"
            );
            out.log(Level::Warn, Topic::Host, text);
        }
    }

    /// Interfaces on the bond that rlbd cannot steer (at start these are a configuration error).
    pub fn unsupported(&self) -> &[(String, String)] {
        self.host.unsupported()
    }

    /// The server's interfaces on the bond, for the start-up line.
    pub fn shape(&self) -> Vec<String> {
        self.host
            .host_ifs()
            .filter_map(|(i, vlan)| {
                let name = &self.host.links().get(&i)?.name;
                Some(if vlan == 0 {
                    name.clone()
                } else {
                    format!("{name} (VLAN {vlan})")
                })
            })
            .collect()
    }

    /// Brings the port list in line with the links: new ports get a capture; what went down,
    /// came up or changed its MAC is returned.
    fn sync_ports(&mut self, out: &mut Outbox) -> PortChanges {
        let mut changes = PortChanges::default();
        let list = self.ports.sync(self.host.links());
        self.refresh_refs();
        if list.is_empty() {
            return changes;
        }
        self.mark_stale_macs(&list);
        self.refresh_infos();
        // Before a new port's capture opens, so that it opens with every port's MAC.
        let refilter = list.iter().any(|c| {
            matches!(
                c,
                Change::Added(_) | Change::Removed(_) | Change::MacChanged { .. }
            )
        });
        if refilter {
            let port_macs = self.ports.macs();
            out.push(Output::Refilter { port_macs });
            self.warn_macs(out);
        }
        for c in list {
            self.port_change(c, &mut changes, out);
        }
        changes
    }

    /// One change of the port list: logged, and what the shell or the steering core must do.
    fn port_change(&self, c: Change, changes: &mut PortChanges, out: &mut Outbox) {
        let name = |i: usize| self.ports.list[i].name.clone();
        match c {
            Change::Added(i) => {
                let port = self.refs[i].clone();
                out.push(Output::OpenCapture { port });
                if !self.ports.list[i].up {
                    changes.down.push(i);
                }
            }
            Change::Removed(i) => {
                let text = format!("port {} removed", name(i));
                out.log_with(Level::Warn, Topic::Port, text, Fields::port(&name(i)));
                let port = self.refs[i].clone();
                out.push(Output::CloseCapture { port });
                changes.down.push(i);
                changes.closed.push(i);
            }
            Change::Down(i) => {
                let text = format!("port {} is down", name(i));
                out.log_with(Level::Warn, Topic::Port, text, Fields::port(&name(i)));
                changes.down.push(i);
            }
            Change::Up(i) => {
                let text = format!("port {} is up", name(i));
                out.log_with(Level::Info, Topic::Port, text, Fields::port(&name(i)));
                changes.up = true;
            }
            Change::Flapped(i) => {
                let text = format!(
                    "port {}: its carrier went down and came back between two messages (a flap \
                     not told, or its messages lost): taken as just back up",
                    name(i)
                );
                out.log_with(Level::Warn, Topic::Port, text, Fields::port(&name(i)));
                changes.flapped.push(i);
                changes.up = true;
            }
            Change::MacChanged { port, old } => {
                let p = &self.ports.list[port];
                let text = format!("port {}: MAC {old} -> {}", p.name, p.mac);
                out.log_with(Level::Info, Topic::Port, text, Fields::port(&p.name));
                changes.macs.push((port, old));
            }
            Change::BondFound(index) => {
                if let Target::Bond(name) = &self.ports.target {
                    let text = format!("bond {name} (ifindex {index}) found");
                    out.log(Level::Info, Topic::Port, text);
                }
            }
            Change::BondMissing => {
                if let Target::Bond(name) = &self.ports.target {
                    let text = format!("bond {name} is gone; waiting for it to return");
                    out.log(Level::Warn, Topic::Port, text);
                }
            }
        }
    }

    /// balance-alb swaps two slaves' MACs in two messages: a port that takes a MAC another
    /// present port still has (as last told) leaves that one's MAC stale until its own message
    /// is in. A port whose MAC changes is told afresh.
    fn mark_stale_macs(&mut self, list: &[Change]) {
        let ports = &self.ports.list;
        self.stale_mac.resize(ports.len(), false);
        for c in list {
            let port = match *c {
                Change::Added(i) => {
                    self.stale_mac[i] = false;
                    continue;
                }
                Change::MacChanged { port, .. } => port,
                _ => continue,
            };
            self.stale_mac[port] = false;
            for (j, q) in ports.iter().enumerate() {
                if j != port && q.present && q.mac == ports[port].mac {
                    self.stale_mac[j] = true;
                }
            }
        }
    }

    /// The steering core's view of the ports. A port whose MAC is stale (another took it, its
    /// own new one not told yet) is no target and sends nothing: a client told that MAC would
    /// send to the other port, maybe a dead one.
    fn refresh_infos(&mut self) {
        let list = &self.ports.list;
        let stale = |i: usize| self.stale_mac.get(i).copied().unwrap_or(false);
        self.infos.clear();
        self.infos
            .extend(list.iter().enumerate().map(|(i, p)| PortInfo {
                name: p.name.clone(),
                mac: p.mac,
                usable: p.usable() && !stale(i),
            }));
    }

    /// Names each port for the outputs; a name or index that did not change keeps its shared
    /// name (no allocation on the second's counter replies).
    fn refresh_refs(&mut self) {
        self.refs.truncate(self.ports.list.len());
        for (i, p) in self.ports.list.iter().enumerate() {
            match self.refs.get_mut(i) {
                Some(r) if r.ifindex == p.ifindex && *r.name == *p.name => {}
                Some(r) => {
                    r.ifindex = p.ifindex;
                    r.name = Arc::from(p.name.as_str());
                }
                None => self.refs.push(PortRef {
                    id: PortId::new(i),
                    ifindex: p.ifindex,
                    name: Arc::from(p.name.as_str()),
                }),
            }
        }
    }

    /// A port's capture is open (or is not): its capacity, configured or the link's speed.
    pub fn capture_opened(
        &mut self,
        port: usize,
        speed_mbps: Option<u64>,
        error: Option<String>,
        out: &mut Outbox,
    ) {
        let Some(p) = self.ports.list.get(port) else {
            return;
        };
        let name = p.name.clone();
        let capacity = self
            .ports
            .capacity_override(&name)
            .or_else(|| speed_mbps.filter(|m| *m > 0).map(|m| m as f64 * 1e6));
        let p = &mut self.ports.list[port];
        p.capacity_bps = capacity.unwrap_or(0.0);
        let text = format!(
            "port {} (ifindex {}) added, MAC {}",
            p.name, p.ifindex, p.mac
        );
        out.log(Level::Info, Topic::Port, text);
        if capacity.is_none() {
            out.log(
                Level::Error,
                Topic::Port,
                format!("port {name}: no capacity (the link reports no speed); set it with --capacity {name}=MBIT"),
            );
        }
        if let Some(e) = error {
            out.log(
                Level::Error,
                Topic::Port,
                format!("port {name}: cannot capture: {e}"),
            );
        }
    }

    /// New settings: the detectors' window and the configured capacities.
    pub fn reconfigure(&mut self, s: &Settings) {
        self.ports.set_window(s.policy.window, s.policy.hits);
        self.ports.capacity_mbps = s
            .capacity_mbps
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        for i in 0..self.ports.list.len() {
            let name = self.ports.list[i].name.clone();
            if let Some(c) = self.ports.capacity_override(&name) {
                self.ports.list[i].capacity_bps = c;
            }
        }
    }
}
