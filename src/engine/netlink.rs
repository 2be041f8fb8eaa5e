//! What the kernel told: netlink events into the host view and the port table, port changes
//! into the steering core (failover, re-assertion after a MAC change), and what the shell must
//! do about them (open or close a capture, re-filter, re-dump).

use log::Level;

use super::{Engine, Output, Topic};
use crate::config::Target;
use crate::host::Change;
use crate::netlink::NlEvent;

impl Engine {
    pub(super) fn on_netlink(&mut self, now: u64, events: &[NlEvent]) {
        let mut links_changed = false;
        let mut addrs_changed = false;
        for ev in events {
            addrs_changed |= matches!(ev, NlEvent::Addr(_) | NlEvent::AddrRemoved(_));
            if let NlEvent::Link(l) = ev {
                if let (Some(i), Some(rx)) = (self.ports.by_ifindex(l.index), l.rx_bytes) {
                    self.ports.list[i].record_counter(now, rx);
                }
            }
            if matches!(ev, NlEvent::Overrun) {
                self.resyncs += 1;
                self.log(
                    Level::Warn,
                    Topic::Host,
                    "netlink: kernel dropped notifications; dumping links, addresses and neighbours again".into(),
                );
                self.out.push_back(Output::Redump);
            }
            links_changed |= self.host.apply(ev).links;
        }
        if links_changed {
            self.sync_ports(now);
        }
        if links_changed || addrs_changed {
            self.refresh_host();
        }
    }

    /// The server's addresses, copied once per change rather than asked per frame; shapes on
    /// the bond that rlbd cannot steer, appearing while it runs, reported once each.
    fn refresh_host(&mut self) {
        self.ours = self.host.our_addresses().collect();
        self.ours.sort();
        self.ours.dedup();
        let macs = self.host.host_macs();
        self.out.push_back(Output::HostMacs(macs));
        let new: Vec<(String, String)> = self
            .host
            .unsupported()
            .iter()
            .filter(|(name, _)| !self.unsupported_seen.contains(name))
            .cloned()
            .collect();
        for (name, why) in new {
            self.log(
                Level::Error,
                Topic::Host,
                format!("interface {name} is not steered: {why}"),
            );
            self.unsupported_seen.push(name);
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

    /// Brings the port list in line with the links: new ports get a capture, ports that went
    /// down or away have their clients moved (and those stranded are rescued when one returns).
    fn sync_ports(&mut self, now: u64) {
        let changes = self.ports.sync(self.host.links());
        if changes.is_empty() {
            return;
        }
        self.refresh_infos();
        let (mut refilter, mut down, mut up, mut macs) = (false, Vec::new(), false, Vec::new());
        for c in changes {
            match c {
                Change::Added(i) => {
                    self.out.push_back(Output::OpenCapture { port: i });
                    refilter = true;
                    if !self.ports.list[i].up {
                        down.push(i);
                    }
                }
                Change::Removed(i) => {
                    let text = format!("port {} removed", self.ports.list[i].name);
                    self.log(Level::Warn, Topic::Port, text);
                    self.out.push_back(Output::CloseCapture { port: i });
                    down.push(i);
                    refilter = true;
                }
                Change::Down(i) => {
                    let text = format!("port {} is down", self.ports.list[i].name);
                    self.log(Level::Warn, Topic::Port, text);
                    down.push(i);
                }
                Change::Up(i) => {
                    let text = format!("port {} is up", self.ports.list[i].name);
                    self.log(Level::Info, Topic::Port, text);
                    up = true;
                }
                Change::MacChanged { port, old } => {
                    let p = &self.ports.list[port];
                    let text = format!("port {}: MAC {old} -> {}", p.name, p.mac);
                    self.log(Level::Info, Topic::Port, text);
                    refilter = true;
                    macs.push(port);
                }
                Change::BondFound(index) => {
                    if let Target::Bond(name) = &self.ports.target {
                        let text = format!("bond {name} (ifindex {index}) found");
                        self.log(Level::Info, Topic::Port, text);
                    }
                }
                Change::BondMissing => {
                    if let Target::Bond(name) = &self.ports.target {
                        let text = format!("bond {name} is gone; waiting for it to return");
                        self.log(Level::Warn, Topic::Port, text);
                    }
                }
            }
        }
        if refilter {
            self.out.push_back(Output::Refilter);
        }
        self.steer_with(now, |s, now, ctx, out| {
            for p in macs {
                s.on_port_mac_changed(now, p, ctx, out);
            }
        });
        if !down.is_empty() || up {
            self.client_snaps(false);
            let clients = std::mem::take(&mut self.snaps);
            let views = self.ports.views();
            self.steer_with(now, |s, now, ctx, out| {
                s.failover(now, &down, &views, &clients, ctx, out)
            });
            self.snaps = clients;
            self.dirty = true;
        }
    }

    /// A port's capture is open (or is not): its capacity, configured or the link's speed.
    pub(super) fn on_capture_opened(
        &mut self,
        port: usize,
        speed_mbps: Option<u64>,
        error: Option<String>,
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
        self.log(Level::Info, Topic::Port, text);
        if capacity.is_none() {
            self.log(
                Level::Error,
                Topic::Port,
                format!("port {name}: no capacity (the link reports no speed); set it with --capacity {name}=MBIT"),
            );
        }
        if let Some(e) = error {
            self.log(
                Level::Error,
                Topic::Port,
                format!("port {name}: cannot capture: {e}"),
            );
        }
    }
}
