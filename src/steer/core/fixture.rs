//! The world the steering core's tests run in: a bond of three ports and one client the
//! kernel confirms for IPv4 and IPv6.

use super::*;
use crate::client::ServerSet;
use crate::host::testing::*;
use crate::host::{HostView, Talk};
use crate::policy::{Move, PolicyConfig, PortView};

pub const P: [Mac; 3] = [
    Mac(2, 0, 0, 0, 0xf, 0),
    Mac(2, 0, 0, 0, 0xf, 1),
    Mac(2, 0, 0, 0, 0xf, 2),
];
const NAMES: [&str; 3] = ["p0", "p1", "p2"];

pub fn cfg() -> SteerConfig {
    SteerConfig {
        policy: PolicyConfig::default(),
        repeats: 3,
        repeat_interval_ms: 250,
        reassert_delay_ms: 20,
        per_client_per_sec: 8,
        total_per_sec: 1000,
        idle_ms: 60_000,
        dry_run: false,
        max_moved: 4096,
        follow_answers: true,
        clients: Default::default(),
        rules_off: RulesOff::default(),
    }
}

/// The server as the core sees it: the host view and three ports' MACs and states.
pub struct World {
    pub host: HostView,
    pub usable: [bool; 3],
    /// Since when an overrun's re-dump is under way.
    pub resync_since: Option<u64>,
}

impl World {
    pub fn new() -> World {
        World {
            host: view(),
            usable: [true; 3],
            resync_since: None,
        }
    }

    pub fn with<R>(&self, f: impl FnOnce(&Ctx) -> R) -> R {
        let ports: Vec<PortInfo> = (0..3)
            .map(|i| PortInfo {
                name: NAMES[i].into(),
                mac: P[i],
                usable: self.usable[i],
            })
            .collect();
        f(&Ctx {
            host: &self.host,
            ports: &ports,
            resync_since: self.resync_since,
        })
    }

    pub fn port_views(&self) -> Vec<PortView> {
        (0..3)
            .map(|i| PortView {
                capacity_bps: 100e6,
                up: self.usable[i],
                rx_bps: 0.0,
                overloaded: false,
                resolution_bps: 0.0,
            })
            .collect()
    }
}

pub fn talk() -> Talk {
    let mut servers = ServerSet::default();
    servers.note(SERVER.into(), 0, 0);
    servers.note(SERVER6.into(), 0, 0);
    Talk {
        v4: Some(CLIENT_IP),
        v6: Some(CLIENT6),
        servers,
    }
}

/// `CLIENT` moved as `m` at `at` (the host view of `w`); whether the move was made.
pub fn make_move(s: &mut Steerer, w: &World, at: u64, m: Move, out: &mut Vec<Action>) -> bool {
    w.with(|ctx| s.apply_move(at, ClientKey::untagged(CLIENT), &talk(), &m, "", ctx, out))
}

pub fn mv(from: PortIndex, to: PortIndex, reason: Reason) -> Move {
    Move {
        client: 0,
        from,
        to,
        rate_bps: 40e6,
        reason,
        from_util: (0.9, 0.5),
        to_util: (0.1, 0.5),
        exchange: false,
        gathers: false,
    }
}

/// The (port, claim) of every frame sent.
pub fn sends(out: &[Action]) -> Vec<(PortIndex, Claim)> {
    out.iter()
        .filter_map(|a| match a {
            Action::Send { port, claim, .. } => Some((*port, *claim)),
            _ => None,
        })
        .collect()
}

pub fn logs(out: &[Action], level: Level) -> Vec<String> {
    out.iter()
        .filter_map(|a| match a {
            Action::Log(l, _, m, _) if *l == level => Some(m.clone()),
            _ => None,
        })
        .collect()
}

pub const V4: Claim = Claim::V4 {
    client: CLIENT_IP,
    server: SERVER,
};
pub const V6: Claim = Claim::V6 {
    client: CLIENT6,
    server: SERVER6,
};

/// A core with CLIENT moved from p0 to p1 at t=0 (its three sends already out).
pub fn moved_to_p1(w: &World) -> Steerer {
    let mut s = Steerer::new(cfg());
    let mut out = Vec::new();
    w.with(|ctx| {
        assert!(s.apply_move(
            0,
            ClientKey::untagged(CLIENT),
            &talk(),
            &mv(0, 1, Reason::Overload),
            "test",
            ctx,
            &mut out
        ));
        s.on_timer(1000, ctx, &mut out);
    });
    assert_eq!(sends(&out).len(), 6, "three rounds of ARP + NA");
    s
}

/// The host's ARP reply to CLIENT from port `p`.
pub fn reply_from(p: PortIndex) -> crate::policy::reassert::ArpSeen {
    crate::policy::reassert::ArpSeen {
        outgoing: true,
        op: 2,
        eth_src: P[p],
        eth_dst: CLIENT,
        sha: P[p],
        spa: SERVER,
        tpa: CLIENT_IP,
        vlan: 0,
    }
}

/// `n` clients on p0 (a /20 of them), each confirmed by the kernel and talking to the server,
/// over IPv4, and with `dual` over IPv6 too: a crowd for the total rate limit.
pub fn crowd(w: &mut World, n: u16, dual: bool) -> Vec<ClientSnap> {
    w.host.apply(&addr(BOND, "198.18.0.1/20"));
    (0..n)
        .map(|i| {
            let [hi, lo] = i.to_be_bytes();
            let mac = Mac(2, 1, 0, 0, hi, lo);
            let ip = std::net::Ipv4Addr::new(198, 18, 1 + hi, lo);
            let ip6 = dual.then(|| std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 1, i));
            let mut servers = ServerSet::default();
            servers.note(SERVER.into(), 0, 0);
            w.host
                .apply(&neigh(BOND, ip.into(), mac, libc::NUD_REACHABLE));
            if let Some(ip6) = ip6 {
                w.host
                    .apply(&neigh(BOND, ip6.into(), mac, libc::NUD_REACHABLE));
                servers.note(SERVER6.into(), 0, 0);
            }
            ClientSnap {
                key: ClientKey::untagged(mac),
                port: 0,
                rate_bps: 1e3,
                quiet_secs: 0,
                talk: Talk {
                    v4: Some(ip),
                    v6: ip6,
                    servers,
                },
            }
        })
        .collect()
}
