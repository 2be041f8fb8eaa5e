//! The world the core's properties run in: four clients (odd ones on VLAN 100) with IPv4 and
//! IPv6 addresses, three ports, the host's view, and the events a run is made of, applied the way
//! the event loop applies them.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::fixture::{cfg, World, P};
use super::*;
use crate::capture::NdKind;
use crate::host::testing::*;
use crate::host::Talk;
use crate::netlink::{AddrEntry, NeighEntry, NlEvent};
use crate::policy::reassert::*;
use crate::policy::Move;

pub(super) use super::props_ops::*;

pub(super) const CLIENTS: usize = 4;
pub(super) const PER_CLIENT: u32 = 8;
pub(super) const TOTAL: u32 = 20;

pub(super) struct Harness {
    pub(super) w: World,
    pub(super) s: Steerer,
    pub(super) now: u64,
    pub(super) macs: [Mac; 3],
    pub(super) sends: HashMap<ClientKey, Vec<u64>>,
    pub(super) all_sends: Vec<u64>,
    pub(super) refusing: [bool; 3],
    /// The port of the host's latest unicast answer to each client rlbd had not moved (and
    /// has not moved since): a failure of that port must move it.
    /// Per client, the port the host last told it to use, and when.
    pub(super) told: HashMap<usize, (usize, u64)>,
}

impl Harness {
    pub(super) fn new() -> Harness {
        let mut w = World::new();
        for c in 0..CLIENTS {
            w.host
                .apply(&neigh(ifx(c), ip4(c).into(), mac(c), libc::NUD_REACHABLE));
            w.host
                .apply(&neigh(ifx(c), ip6(c).into(), mac(c), libc::NUD_STALE));
        }
        let s = Steerer::new(SteerConfig {
            per_client_per_sec: PER_CLIENT,
            total_per_sec: TOTAL,
            ..cfg()
        });
        Harness {
            w,
            s,
            now: 0,
            macs: P,
            sends: HashMap::new(),
            all_sends: Vec::new(),
            refusing: [false; 3],
            told: HashMap::new(),
        }
    }

    fn ports(&self) -> Vec<PortInfo> {
        (0..3)
            .map(|i| PortInfo {
                name: ["p0", "p1", "p2"][i].into(),
                mac: self.macs[i],
                usable: self.w.usable[i],
            })
            .collect()
    }

    /// Runs `f` on the core with the current world, then checks every frame it sent.
    fn run(&mut self, f: impl FnOnce(&mut Steerer, &Ctx, u64, &mut Vec<Action>)) -> Vec<Action> {
        let ports = self.ports();
        let mut out = Vec::new();
        let ctx = Ctx {
            host: &self.w.host,
            ports: &ports,
            resync_since: None,
        };
        f(&mut self.s, &ctx, self.now, &mut out);
        // The event loop reports each frame's outcome right after sending it.
        let outcomes: Vec<(ClientKey, u64, SendOutcome)> = out
            .iter()
            .filter_map(|a| match a {
                Action::Send {
                    port,
                    client,
                    move_id,
                    ..
                } => Some((
                    *client,
                    *move_id,
                    if self.refusing[*port] {
                        SendOutcome::Refused
                    } else {
                        SendOutcome::Sent
                    },
                )),
                _ => None,
            })
            .collect();
        let mut more = Vec::new();
        for (c, id, o) in outcomes {
            self.s.on_send_result(self.now, c, id, o, &ctx, &mut more);
        }
        assert!(
            more.iter().all(|a| matches!(a, Action::Log(..))),
            "an outcome only logs"
        );
        self.check_actions(&out);
        self.check_refused();
        let moved = &self.s.moved;
        self.told.retain(|c, _| !moved.contains_key(&key(*c)));
        out
    }

    fn arp(&mut self, seen: ArpSeen, n: usize) {
        let before: Vec<u64> = (0..CLIENTS).map(|c| self.reasserts(c)).collect();
        self.run(|s, ctx, now, out| {
            for _ in 0..n {
                s.on_arp(now, &seen, ctx, out);
            }
        });
        self.check_one_reassertion(&before);
    }

    fn nd(&mut self, seen: NdSeen, n: usize) {
        let before: Vec<u64> = (0..CLIENTS).map(|c| self.reasserts(c)).collect();
        self.run(|s, ctx, now, out| {
            for _ in 0..n {
                s.on_nd(now, &seen, ctx, out);
            }
        });
        self.check_one_reassertion(&before);
    }

    fn note_told(&mut self, c: usize, p: usize) {
        if self.s.moved.contains_key(&key(c)) {
            self.told.remove(&c);
        } else {
            self.told.insert(c, (p, self.now));
        }
    }

    /// After `p`'s failure, every client the host last told to use `p` is on a live port, if
    /// the kernel still confirms what its answers paired and a port is left.
    fn check_told_followed(&self, p: usize, told_there: &[(usize, Vec<Claim>)]) {
        if !self.w.usable.iter().any(|u| *u) {
            return;
        }
        for (c, claims) in told_there {
            if self
                .w
                .host
                .claims_for(key(*c), &Talk::from_claims(claims))
                .is_err()
            {
                continue;
            }
            let m = self.s.moved.get(&key(*c));
            assert!(
                m.is_some_and(|m| self.w.usable[m.port]),
                "client {c}, told to use p{p}, left there when it failed ({m:?})"
            );
        }
    }

    /// Lets `dt` pass, waking at every due time as the event loop does.
    pub(super) fn advance(&mut self, dt: u64) {
        let end = self.now + dt;
        while let Some(due) = self.s.next_due().filter(|t| *t <= end) {
            self.now = self.now.max(due);
            self.run(|s, ctx, now, out| s.on_timer(now, ctx, out));
        }
        self.now = end;
    }

    pub(super) fn reasserts(&self, c: usize) -> u64 {
        self.s.moved(&key(c)).map_or(0, |m| m.reasserts)
    }

    pub(super) fn apply(&mut self, op: Op) {
        let moved_before: HashMap<ClientKey, u64> =
            self.s.moved.iter().map(|(k, m)| (*k, m.at_ms)).collect();
        match op {
            Op::Move {
                c,
                to,
                failover,
                v6,
            } => self.do_move(c, to, failover, v6),
            Op::HostReply { .. }
            | Op::HostBroadcast { .. }
            | Op::ClientAsks { .. }
            | Op::HostNa { .. }
            | Op::ClientSolicits { .. } => self.wire(op),
            Op::Neigh { .. } | Op::Addr { .. } => self.kernel(op),
            Op::PortDown(_) | Op::PortUp(_) | Op::MacChanged(_) => self.port(op),
            Op::Refusing { p, on } => self.refusing[p] = on,
            Op::Rebalance { hot, rates, on } => self.rebalance(hot, rates, on),
            Op::Advance(dt) => self.advance(dt),
            Op::Forget { active } => {
                self.run(|s, ctx, now, out| {
                    s.forget_idle(
                        now,
                        |k| (0..CLIENTS).any(|c| key(c) == *k && active[c]),
                        ctx,
                        out,
                    )
                });
            }
        }
        self.check_hold_down(&moved_before);
    }

    fn do_move(&mut self, c: usize, to: usize, failover: bool, v6: bool) {
        let reason = if failover {
            Reason::Failover
        } else {
            Reason::Overload
        };
        let mv = Move {
            client: 0,
            from: (to + 1) % 3,
            to,
            rate_bps: 1e6,
            reason,
            from_util: (0.9, 0.8),
            to_util: (0.1, 0.2),
            exchange: false,
            gathers: false,
        };
        self.run(|s, ctx, now, out| {
            s.apply_move(now, key(c), &talk(c, v6), &mv, "prop", ctx, out);
        });
    }

    /// ARP and Neighbor Discovery seen on the wire.
    fn wire(&mut self, op: Op) {
        let b = Mac::broadcast();
        match op {
            Op::HostReply { c, p, n } => {
                self.note_told(c, p);
                let m = self.macs[p];
                self.arp(
                    ArpSeen {
                        outgoing: true,
                        op: 2,
                        eth_src: m,
                        eth_dst: mac(c),
                        sha: m,
                        spa: server4(c),
                        tpa: ip4(c),
                        vlan: vlan(c),
                    },
                    n,
                );
            }
            Op::HostBroadcast { p, n, vlan } => {
                let m = self.macs[p];
                self.arp(
                    ArpSeen {
                        outgoing: true,
                        op: 1,
                        eth_src: m,
                        eth_dst: b,
                        sha: m,
                        spa: Ipv4Addr::new(198, 18, 0, 1),
                        tpa: Ipv4Addr::new(198, 18, 0, 200),
                        vlan,
                    },
                    n,
                );
            }
            Op::ClientAsks { c, n } => {
                let m = mac(c);
                self.arp(
                    ArpSeen {
                        outgoing: false,
                        op: 1,
                        eth_src: m,
                        eth_dst: b,
                        sha: m,
                        spa: ip4(c),
                        tpa: server4(c),
                        vlan: vlan(c),
                    },
                    n,
                );
            }
            op @ (Op::HostNa { .. } | Op::ClientSolicits { .. }) => self.wire_nd(op),
            _ => unreachable!(),
        }
    }

    /// The Neighbor Discovery half of the wire's events.
    fn wire_nd(&mut self, op: Op) {
        match op {
            Op::HostNa { p, multicast, c, n } => {
                if !multicast {
                    self.note_told(c, p);
                }
                let m = self.macs[p];
                let dst = if multicast {
                    Mac(0x33, 0x33, 0, 0, 0, 1)
                } else {
                    mac(c)
                };
                let seen = NdSeen {
                    outgoing: true,
                    kind: NdKind::Na,
                    eth_src: m,
                    eth_dst: dst,
                    target: server6(c),
                    lladdr: Some(m),
                    src_ip: server6(c),
                    dst_ip: if multicast {
                        Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1)
                    } else {
                        ip6(c)
                    },
                    vlan: vlan(c),
                };
                self.nd(seen, n);
            }
            Op::ClientSolicits { c, n } => {
                let seen = NdSeen {
                    outgoing: false,
                    kind: NdKind::Ns,
                    eth_src: mac(c),
                    eth_dst: Mac(0x33, 0x33, 0xff, 0, 0, 1),
                    target: server6(c),
                    lladdr: Some(mac(c)),
                    src_ip: ip6(c),
                    dst_ip: server6(c),
                    vlan: vlan(c),
                };
                self.nd(seen, n);
            }
            _ => unreachable!(),
        }
    }

    /// Neighbour entries and the server's addresses changing in the kernel (an address change
    /// hits the bond's and the VLAN's alike).
    fn kernel(&mut self, op: Op) {
        if let Op::Addr { v6, present } = op {
            for (ifindex, net) in [
                (
                    BOND,
                    if v6 {
                        "2001:db8::1/64"
                    } else {
                        "198.18.0.1/24"
                    },
                ),
                (
                    VLAN_IF,
                    if v6 {
                        "2001:db8:100::1/64"
                    } else {
                        "198.18.100.1/24"
                    },
                ),
            ] {
                let a = AddrEntry {
                    ifindex,
                    network: net.parse().unwrap(),
                };
                self.w.host.apply(&if present {
                    NlEvent::Addr(a)
                } else {
                    NlEvent::AddrRemoved(a)
                });
            }
            return;
        }
        let ev = match op {
            Op::Neigh { c, v6, ok } => NlEvent::Neigh(NeighEntry {
                ifindex: ifx(c),
                ip: if v6 {
                    IpAddr::from(ip6(c))
                } else {
                    IpAddr::from(ip4(c))
                },
                mac: Some(mac(c)),
                state: if ok {
                    libc::NUD_REACHABLE
                } else {
                    libc::NUD_FAILED
                },
            }),
            _ => unreachable!(),
        };
        self.w.host.apply(&ev);
    }

    /// Ports failing, coming back, changing MAC; the shell calls failover on both of the
    /// first two (coming back rescues clients stranded while no port was left).
    fn port(&mut self, op: Op) {
        match op {
            Op::PortDown(p) | Op::PortUp(p) => {
                self.w.usable[p] = matches!(op, Op::PortUp(_));
                let down: Vec<usize> = if self.w.usable[p] { vec![] } else { vec![p] };
                // The core's record holds every client the host last told to use `p`.
                let recorded = self.s.answered.on_ports(&down);
                let told_there: Vec<(usize, Vec<Claim>)> = (0..CLIENTS)
                    .filter(|c| !down.is_empty() && self.told.get(c).is_some_and(|t| t.0 == p))
                    .map(|c| {
                        let r = recorded.iter().find(|r| r.key == key(c));
                        assert!(r.is_some(), "client {c} told to use p{p}, not recorded");
                        (c, r.map(|r| r.claims.clone()).unwrap_or_default())
                    })
                    .collect();
                let views = self.w.port_views();
                self.run(|s, ctx, now, out| s.failover(now, &down, &views, &[], ctx, out));
                self.check_none_stranded();
                self.check_told_followed(p, &told_there);
            }
            Op::MacChanged(p) => {
                self.macs[p].5 ^= 0x80;
                self.run(|s, ctx, now, out| s.on_port_mac_changed(now, p, ctx, out));
            }
            _ => unreachable!(),
        }
    }

    fn rebalance(&mut self, hot: usize, rates: [u8; CLIENTS], on: [usize; CLIENTS]) {
        let mut views = self.w.port_views();
        views[hot].overloaded = true;
        let snaps: Vec<ClientSnap> = (0..CLIENTS)
            .map(|c| ClientSnap {
                key: key(c),
                port: on[c],
                rate_bps: f64::from(rates[c]) * 1e6 / 4.0,
                quiet_secs: 0,
                talk: talk(c, c % 2 == 0),
            })
            .collect();
        for s in &snaps {
            views[s.port].rx_bps += s.rate_bps;
        }
        self.run(|s, ctx, now, out| {
            s.rebalance(now, (&views, &[]), &snaps, &|_| "prop".into(), ctx, out);
        });
        // A client counted since it was told sends where its frames arrive.
        let since = self.now.saturating_sub(1500);
        for (c, (p, at)) in self.told.iter_mut() {
            if rates[*c] > 0 && *at < since {
                (*p, *at) = (on[*c], since);
            }
        }
    }
}
