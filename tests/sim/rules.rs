//! The rules checked as the run goes: on every frame the engine sends, and after every simulated
//! second. A broken rule is returned as words; the driver fails with the seed and the trace.

use std::collections::{HashMap, VecDeque};

use rlbd::capture::{parse, Frame, NdKind};
use rlbd::policy::Reason;
use rlbd::status::StatusReport;
use rlbd::Mac;

use super::balance::Balance;
use super::bond::{untag, SERVER_V};
use super::clients::{SERVER, SERVER_B};
use super::nd::SERVER6;
use super::world::World;

pub struct Rules {
    pub per_client: u32,
    pub total: u32,
    pub hold_down_ms: u64,
    /// The hold-down before the last reload, and when that was: a move decided before it was
    /// held by the old one (the status gives its time to the second, so the lesser of the two
    /// applies near the reload).
    old_hold_down_ms: u64,
    reloaded_at: Option<u64>,
    /// Times of the frames sent (Ok) in the last second, per client and in all.
    sent: HashMap<Mac, VecDeque<u64>>,
    all: VecDeque<u64>,
    /// Each client's last chosen (overload) move, ms, as the status reported it.
    chosen: HashMap<String, u64>,
    /// When the engine under test was made (a restart makes a new one): answers the host gave
    /// before it are not its to know.
    pub engine_started: u64,
    /// The engine was restarted with the state file at this time: the first status 2 s on (its
    /// clients counted again) must show every move still held.
    pub restored: Option<u64>,
    /// Once settled, no port over its threshold while another has room.
    pub balance: Balance,
    /// Figures for the report.
    pub frames_checked: u64,
    pub advertisements_checked: u64,
    pub tagged_checked: u64,
    pub chosen_moves: u64,
    /// The addresses `[clients]` excludes: their clients are never sent a frame, and are left
    /// where the kernel puts them.
    pub excluded: Vec<std::net::Ipv4Addr>,
}

/// How long a client the engine knows may stay on a dead port.
pub const DEAD_PORT_GRACE_MS: u64 = 1_000;

impl Rules {
    pub fn new(per_client: u32, total: u32, policy: &rlbd::policy::PolicyConfig) -> Rules {
        Rules {
            balance: Balance::new(policy),
            per_client,
            total,
            hold_down_ms: policy.hold_down * 1000,
            old_hold_down_ms: policy.hold_down * 1000,
            reloaded_at: None,
            sent: HashMap::new(),
            all: VecDeque::new(),
            chosen: HashMap::new(),
            engine_started: 0,
            restored: None,
            frames_checked: 0,
            advertisements_checked: 0,
            tagged_checked: 0,
            chosen_moves: 0,
            excluded: Vec::new(),
        }
    }

    /// Whether `[clients]` excludes `c` (by the IPv4 address it uses).
    pub fn excludes(&self, c: &super::clients::Client) -> bool {
        c.ip6.is_none() && self.excluded.contains(&c.ip)
    }

    /// A restart without the state file: the engine rightly forgets budgets and hold-downs.
    pub fn forget(&mut self) {
        self.sent.clear();
        self.all.clear();
        self.chosen.clear();
    }

    /// A reload's new limits: the send windows start again (a frame sent under the old limit
    /// is no breach of a lower new one).
    pub fn reconfigure(
        &mut self,
        now: u64,
        per_client: u32,
        total: u32,
        hold_down_secs: u64,
        threshold: f64,
    ) {
        self.per_client = per_client;
        self.total = total;
        self.old_hold_down_ms = self.hold_down_ms;
        self.reloaded_at = Some(now);
        self.hold_down_ms = hold_down_secs * 1000;
        self.balance.threshold = threshold;
        self.sent.clear();
        self.all.clear();
    }

    /// A frame the engine sent and the kernel took, out of `port`.
    pub fn on_sent(
        &mut self,
        now: u64,
        world: &World,
        port: usize,
        bytes: &[u8],
    ) -> Result<(), String> {
        self.frames_checked += 1;
        let pmac = world.ports[port].mac;
        let (vlan, inner) = untag(bytes);
        self.tagged_checked += u64::from(vlan != 0);
        let f = parse(&inner);
        let eth_dst = match f {
            Some(Frame::Arp { .. }) => self.check_arp(world, port, vlan, f)?,
            Some(Frame::Nd { .. }) => self.check_na(world, port, vlan, f)?,
            _ => {
                // The only other frame: the learning frame, from and to the port's own MAC.
                let own = bytes.len() >= 12
                    && bytes[0..6] == pmac.octets()
                    && bytes[6..12] == pmac.octets();
                return own
                    .then_some(())
                    .ok_or_else(|| format!("frame on {port} neither ARP, NA nor learning: {f:?}"));
            }
        };
        if let Some(c) = world
            .clients
            .iter()
            .find(|c| c.mac == eth_dst && self.excludes(c))
        {
            return Err(format!(
                "a frame to {eth_dst} ({}), which [clients] excludes",
                c.ip
            ));
        }
        let w = self.sent.entry(eth_dst).or_default();
        push_window(w, now);
        if w.len() as u32 > 2 * self.per_client {
            return Err(format!(
                "{} frames to {eth_dst} within 1 s (per_client_per_sec {})",
                w.len(),
                self.per_client
            ));
        }
        push_window(&mut self.all, now);
        if self.all.len() as u32 > 2 * self.total {
            return Err(format!(
                "{} frames within 1 s (total_per_sec {})",
                self.all.len(),
                self.total
            ));
        }
        Ok(())
    }

    /// rlbd's ARP update: from the port, claiming the address the client talks to, tagged for
    /// its VLAN, to a client the server's neighbour table confirms. Its destination.
    fn check_arp(
        &self,
        world: &World,
        port: usize,
        vlan: u16,
        f: Option<Frame>,
    ) -> Result<Mac, String> {
        let pmac = world.ports[port].mac;
        let Some(Frame::Arp {
            eth_dst,
            eth_src,
            sha,
            spa,
            tpa,
            op,
            ..
        }) = f
        else {
            return Err(format!("not ARP: {f:?}"));
        };
        // The address it claims is the one the client talks to (several are the server's); a
        // client gone from its slot (a new MAC took it) still has the server's entry for a while.
        let talks = match world.clients.iter().find(|c| c.mac == eth_dst) {
            Some(c) => c.server == spa && c.vlan == vlan,
            None => [SERVER, SERVER_B, SERVER_V].contains(&spa),
        };
        if !talks || (op == 2 && tpa != spa) || eth_src != pmac || sha != pmac {
            return Err(format!(
                "ARP claims beyond the client's server address or the port: {f:?} on port {port}"
            ));
        }
        if !world.confirms(eth_dst) {
            return Err(format!(
                "ARP to {eth_dst}, which the server's neighbour table does not confirm"
            ));
        }
        Ok(eth_dst)
    }

    /// rlbd's unsolicited NA: the server's address at the port's MAC, with Override, tagged for
    /// the client's VLAN, to a client the server confirms at that address. Its destination.
    fn check_na(
        &mut self,
        world: &World,
        port: usize,
        vlan: u16,
        f: Option<Frame>,
    ) -> Result<Mac, String> {
        let pmac = world.ports[port].mac;
        let Some(Frame::Nd {
            eth_dst,
            eth_src,
            kind,
            target,
            src_ip,
            dst_ip,
            override_flag,
            lladdr,
        }) = f
        else {
            return Err(format!("not ND: {f:?}"));
        };
        // A client gone from its slot (a new MAC took it) has the server's entry for a while.
        let on_vlan = world
            .clients
            .iter()
            .find(|c| c.mac == eth_dst)
            .is_none_or(|c| c.vlan == vlan);
        let ours = kind == NdKind::Na && target == SERVER6 && src_ip == SERVER6;
        if !ours || eth_src != pmac || lladdr != Some(pmac) || !override_flag || !on_vlan {
            return Err(format!(
                "NA claims beyond the server's address or port, or without Override: {f:?} on \
                 port {port}"
            ));
        }
        if !world.confirms_at(dst_ip.into(), eth_dst) {
            return Err(format!(
                "NA to {dst_ip} at {eth_dst}, which the server's neighbour table does not confirm"
            ));
        }
        self.advertisements_checked += 1;
        Ok(eth_dst)
    }

    /// The hold-down in force for a move decided at `at`.
    fn hold_down_at(&self, at: u64) -> u64 {
        match self.reloaded_at {
            Some(r) if at < r + 2_000 => self.hold_down_ms.min(self.old_hold_down_ms),
            _ => self.hold_down_ms,
        }
    }

    /// After a second: the status's word on moves (hold-down), memory, dead ports.
    pub fn after_second(
        &mut self,
        now: u64,
        world: &World,
        st: &StatusReport,
    ) -> Result<(), String> {
        let t = &st.totals;
        if t.clients_tracked > t.table_capacity {
            return Err(format!(
                "{} clients tracked > table {}",
                t.clients_tracked, t.table_capacity
            ));
        }
        if self.restored.is_some_and(|t| now >= t + 2_000) {
            self.restored = None;
            self.held_moves_survived(now, st)?;
        }
        for c in &st.clients {
            let Some(m) = c.moved.as_ref().filter(|m| m.reason == Reason::Overload) else {
                continue;
            };
            let at = now.saturating_sub(m.secs_ago * 1000);
            let key = format!("{} {}", c.mac, c.vlan);
            match self.chosen.get(&key) {
                Some(prev) if at.abs_diff(*prev) <= 1_500 => {}
                Some(prev) if at < prev + self.hold_down_at(at) - 1_500 => {
                    return Err(format!("{key}: chosen move at {at} ms, {} ms after the one at {prev} (hold-down {} ms)", at - prev, self.hold_down_at(at)));
                }
                _ => {
                    self.chosen_moves += 1;
                    self.chosen.insert(key, at);
                }
            }
        }
        self.balance.check(now, world, st)?;
        self.dead_ports(now, world, st)?;
        self.answered_on_dead_ports(now, world)
    }

    /// After a restart with the state file, every client the status lists whose chosen move is
    /// still in its hold-down is still shown moved: the move was taken over, not forgotten.
    fn held_moves_survived(&self, now: u64, st: &StatusReport) -> Result<(), String> {
        for c in st.clients.iter().filter(|c| c.moved.is_none()) {
            let key = format!("{} {}", c.mac, c.vlan);
            if let Some(at) = self.chosen.get(&key) {
                if now < at + self.hold_down_ms.saturating_sub(2_000) {
                    return Err(format!(
                        "{key}: its move at {at} ms, still in its hold-down, is gone after a \
                         restart with the state file"
                    ));
                }
            }
        }
        Ok(())
    }

    /// No client the host's frames (or the engine's) put on a port since the engine started is
    /// left on it once it is dead, sending or not: its next frames would be lost (plain ports:
    /// nobody but rlbd moves it). The grace covers the total rate limit's turns.
    fn answered_on_dead_ports(&self, now: u64, world: &World) -> Result<(), String> {
        let turns = 1000 * world.clients.len() as u64 / u64::from(self.total.max(1));
        // An excluded client is the kernel's (and the driver's) to place, dead port or not.
        let ours = |c: &&super::clients::Client| c.present && !self.excludes(c);
        for cl in world.clients.iter().filter(ours) {
            let Some(e) = cl.entry.filter(|e| e.updated >= self.engine_started) else {
                continue;
            };
            let Some(p) = world.port_of_mac(e.mac) else {
                continue;
            };
            let port = &world.ports[p];
            if port.up || now < port.down_since + DEAD_PORT_GRACE_MS + turns {
                continue;
            }
            if e.updated < port.down_since && world.confirms(cl.mac) {
                return Err(format!(
                    "client {} ({}) told at {} ms to use {}, still on it {} ms after it went down \
                     at {} ms; its entry {e:?}",
                    cl.mac,
                    cl.ip,
                    e.updated,
                    port.name,
                    now - port.down_since,
                    port.down_since
                ));
            }
        }
        Ok(())
    }

    fn dead_ports(&mut self, now: u64, world: &World, st: &StatusReport) -> Result<(), String> {
        // A failover's first frames wait their turns for the total rate limit.
        let turns = 1000 * world.clients.len() as u64 / u64::from(self.total.max(1));
        let known: std::collections::HashSet<&str> =
            st.clients.iter().map(|c| c.mac.as_str()).collect();
        for cl in world
            .clients
            .iter()
            .filter(|c| c.present && c.demand_bps > 0.0 && !self.excludes(c))
        {
            let Some(p) = cl.target().and_then(|m| world.port_of_mac(m)) else {
                continue;
            };
            let port = &world.ports[p];
            if port.up || now < port.down_since + DEAD_PORT_GRACE_MS + turns {
                continue;
            }
            let mac = cl.mac.to_string();
            if known.contains(mac.as_str()) && world.confirms(cl.mac) {
                let seen = st.clients.iter().find(|c| c.mac == mac);
                return Err(format!(
                    "client {mac} ({}) still on {}, down since {} ms; its entry {:?}, demand {} bit/s, delivered {}; \
                     the engine's view {seen:?}",
                    cl.ip, port.name, port.down_since, cl.entry, cl.demand_bps, cl.delivered_bps
                ));
            }
        }
        Ok(())
    }
}

/// Adds `now` to a window of the last second's times.
fn push_window(w: &mut VecDeque<u64>, now: u64) {
    while w.front().is_some_and(|t| *t + 1000 <= now) {
        w.pop_front();
    }
    w.push_back(now);
}
