//! Reading the two inputs: netlink events into the host view and the port table (and the port
//! changes into the steering core), captured frames into the client table and, for ARP and
//! Neighbor Discovery, the steering core.

use std::time::Instant;

use log::{error, info, warn};

use super::{with_ctx, Daemon, CAPTURE_BATCH, NETLINK_BATCH};
use crate::capture::frame::tag_in_frame;
use crate::capture::{parse, Frame, PACKET_HOST};
use crate::client::ClientKey;
use crate::host::Change;
use crate::netlink::{NlEvent, RouteSocket};
use crate::steer::{ArpSeen, NdSeen};

impl Daemon {
    pub(super) fn read_netlink(&mut self) {
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
        let now_ms = self.clock.ms(Instant::now());
        let mut links_changed = false;
        let mut addrs_changed = false;
        for ev in &events {
            addrs_changed |= matches!(ev, NlEvent::Addr(_) | NlEvent::AddrRemoved(_));
            if let NlEvent::Link(l) = ev {
                if let (Some(i), Some(rx)) = (self.ports.by_ifindex(l.index), l.rx_bytes) {
                    self.ports.list[i].record_counter(now_ms, rx);
                }
                // The port's packet rate chooses its sampling ratio.
                if let (Some(i), Some(pk)) = (self.ports.by_ifindex(l.index), l.rx_packets) {
                    self.captures
                        .sample_from_counter(&self.ports, i, now_ms, pk);
                }
            }
            if matches!(ev, NlEvent::Overrun) {
                self.redump();
            }
            links_changed |= self.host.apply(ev).links;
        }
        if links_changed {
            self.sync_ports();
        }
        if links_changed || addrs_changed {
            self.refresh_host();
        }
    }

    /// What the capture path needs from the host view, copied once per change rather than asked
    /// per frame: the server's addresses and its interfaces' own MACs. Shapes on the bond that
    /// rlbd cannot steer, appearing while it runs, are reported once each.
    pub(super) fn refresh_host(&mut self) {
        self.ours = self.host.our_addresses().collect();
        self.ours.sort();
        self.ours.dedup();
        self.captures
            .set_host_macs(&self.ports, self.host.host_macs());
        for (name, why) in self.host.unsupported() {
            if !self.unsupported_seen.contains(name) {
                error!("interface {name} is not steered: {why}");
                self.unsupported_seen.push(name.clone());
            }
        }
    }

    fn redump(&mut self) {
        warn!(
            "netlink: kernel dropped notifications; dumping links, addresses and neighbours again"
        );
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

    /// Brings the port list in line with the links; opens captures for new ports, and moves
    /// clients off ports that went down (and rescues those stranded when one comes back).
    pub(super) fn sync_ports(&mut self) {
        let changes = self.ports.sync(self.host.links());
        if changes.is_empty() {
            return;
        }
        let (mut refilter, mut down, mut up, mut macs) = (false, Vec::new(), false, Vec::new());
        for c in changes {
            match c {
                Change::Added(i) => {
                    self.port_added(i);
                    refilter = true;
                    if !self.ports.list[i].up {
                        down.push(i);
                    }
                }
                Change::Removed(i) => {
                    warn!("port {} removed", self.ports.list[i].name);
                    self.captures.close(i, self.poll.registry());
                    down.push(i);
                    refilter = true;
                }
                Change::Down(i) => {
                    warn!("port {} is down", self.ports.list[i].name);
                    down.push(i);
                }
                Change::Up(i) => {
                    info!("port {} is up", self.ports.list[i].name);
                    up = true;
                }
                Change::MacChanged { port, old } => {
                    let p = &self.ports.list[port];
                    info!("port {}: MAC {old} -> {}", p.name, p.mac);
                    refilter = true;
                    macs.push(port);
                }
                Change::BondFound(index) => {
                    if let crate::config::Target::Bond(name) = &self.ports.target {
                        info!("bond {name} (ifindex {index}) found");
                    }
                }
                Change::BondMissing => {
                    if let crate::config::Target::Bond(name) = &self.ports.target {
                        warn!("bond {name} is gone; waiting for it to return");
                    }
                }
            }
        }
        if refilter {
            self.captures.refilter(&self.ports);
        }
        let now_ms = self.clock.ms(Instant::now());
        let (steer, out) = (&mut self.steer, &mut self.actions);
        with_ctx(&self.host, &self.ports, |ctx| {
            for p in macs {
                steer.on_port_mac_changed(now_ms, p, ctx, out);
            }
        });
        if !down.is_empty() || up {
            let clients = self.client_snaps(false);
            let views = self.ports.views();
            let (steer, out) = (&mut self.steer, &mut self.actions);
            with_ctx(&self.host, &self.ports, |ctx| {
                steer.failover(now_ms, &down, &views, &clients, ctx, out)
            });
        }
        self.carry_out();
    }

    /// A port's capacity, bit/s: configured, else the link's speed (read from sysfs here, not
    /// in the pure port table).
    pub(super) fn capacity_of(&self, name: &str) -> Option<f64> {
        self.ports.capacity_override(name).or_else(|| {
            crate::netlink::link_speed_mbps(name)
                .filter(|m| *m > 0)
                .map(|m| m as f64 * 1e6)
        })
    }

    /// A port appeared: its capacity and its capture.
    fn port_added(&mut self, i: usize) {
        let name = self.ports.list[i].name.clone();
        let capacity = self.capacity_of(&name);
        let p = &mut self.ports.list[i];
        p.capacity_bps = capacity.unwrap_or(0.0);
        info!(
            "port {} (ifindex {}) added, MAC {}",
            p.name, p.ifindex, p.mac
        );
        if capacity.is_none() {
            error!(
                "port {name}: no capacity (the link reports no speed); set it with --capacity {name}=MBIT"
            );
        }
        if let Err(e) = self.captures.open(&self.ports, i, self.poll.registry()) {
            error!("port {name}: cannot capture: {e}");
        }
    }

    pub(super) fn read_capture(&mut self, i: usize) {
        let tick = self.clock.tick;
        let port = i as u16;
        // Reused across calls: the hot path allocates nothing per frame or per wakeup.
        let mut arps = std::mem::take(&mut self.arp_buf);
        let table = &mut self.table;
        let ours = &self.ours;
        let is_ours = |ip: std::net::IpAddr| ours.contains(&ip);
        // Frames to a macvlan's (or a bridge's own) MAC reach the port as another host's; they
        // are the server's all the same. A frame for another port's MAC flooded here
        // (promiscuous port, a switch that forgot a MAC) is not this port's load.
        let Some((cap, host_macs)) = self.captures.socket_and_host_macs(i) else {
            self.captures.ready[i] = false;
            return;
        };
        let n = cap.drain(CAPTURE_BATCH, |meta, bytes| {
            let vlan = meta.vlan.unwrap_or_else(|| tag_in_frame(bytes));
            if vlan == u16::MAX {
                return;
            }
            let host = |dst: &crate::Mac| meta.pkt_type == PACKET_HOST || host_macs.contains(dst);
            match parse(bytes) {
                Some(Frame::Ipv4 {
                    src_mac,
                    dst_mac,
                    src_ip,
                    dst_ip,
                }) if host(&dst_mac) => {
                    let key = ClientKey::new(src_mac, vlan);
                    let (src, dst) = (src_ip.into(), dst_ip.into());
                    table.account(key, src, dst, port, meta.bytes(), tick, is_ours);
                }
                Some(Frame::Ipv6 {
                    src_mac,
                    dst_mac,
                    src_ip,
                    dst_ip,
                }) if host(&dst_mac) => {
                    let key = ClientKey::new(src_mac, vlan);
                    let (src, dst) = (src_ip.into(), dst_ip.into());
                    table.account(key, src, dst, port, meta.bytes(), tick, is_ours);
                }
                Some(f @ (Frame::Arp { .. } | Frame::Nd { .. })) => {
                    // ARP and Neighbor Discovery are rare; a flood of them is bounded by the
                    // batch.
                    arps.push((f, meta.is_outgoing(), vlan));
                }
                _ => {}
            }
        });
        let more = n >= CAPTURE_BATCH || cap.pending();
        self.captures.ready[i] = more;
        let now_ms = self.clock.ms(Instant::now());
        self.captures.sample_from_drained(&self.ports, i, now_ms, n);
        self.watch_frames(&mut arps);
        self.arp_buf = arps;
        self.carry_out();
    }

    /// ARP and Neighbor Discovery frames of one batch, to the steering core (which re-asserts
    /// the moves they put at risk).
    fn watch_frames(&mut self, frames: &mut Vec<(Frame, bool, u16)>) {
        let now_ms = self.clock.ms(Instant::now());
        for (f, outgoing, _vlan) in frames.iter() {
            self.trouble.note_claim(now_ms, f, *outgoing, &self.host);
        }
        let (steer, out) = (&mut self.steer, &mut self.actions);
        with_ctx(&self.host, &self.ports, |ctx| {
            for (f, outgoing, vlan) in frames.drain(..) {
                match f {
                    Frame::Arp {
                        eth_src,
                        eth_dst,
                        op,
                        sha,
                        spa,
                        tpa,
                        ..
                    } => {
                        let seen = ArpSeen {
                            outgoing,
                            op,
                            eth_src,
                            eth_dst,
                            sha,
                            spa,
                            tpa,
                            vlan,
                        };
                        steer.on_arp(now_ms, &seen, ctx, out);
                    }
                    Frame::Nd {
                        eth_src,
                        eth_dst,
                        kind,
                        target,
                        src_ip,
                        dst_ip,
                        lladdr,
                        ..
                    } => {
                        let seen = NdSeen {
                            outgoing,
                            kind,
                            eth_src,
                            eth_dst,
                            target,
                            lladdr,
                            src_ip,
                            dst_ip,
                            vlan,
                        };
                        steer.on_nd(now_ms, &seen, ctx, out);
                    }
                    _ => {}
                }
            }
        });
    }
}
