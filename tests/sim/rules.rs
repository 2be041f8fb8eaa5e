//! The rules checked as the run goes: on every frame the engine sends, and after every simulated
//! second. A broken rule is returned as words; the driver fails with the seed and the trace.

use std::collections::HashSet;

use rlbd::capture::{parse, Frame, NdKind};
use rlbd::status::StatusReport;
use rlbd::Mac;

use super::balance::Balance;
use super::checks::Check;
use super::limits::Limits;
use super::moves::Moves;
use rlbd::simulate::lan::bond::{untag, SERVER_V};
use rlbd::simulate::lan::clients::{SERVER, SERVER_B};
use rlbd::simulate::lan::nd::SERVER6;
use rlbd::simulate::lan::World;

/// How long a port back up is no target while another is stable (rlbd's `STABLE_MS`, as
/// documented: the check keeps its own figure, so that an engine that shortens it is caught).
const STABLE_MS: u64 = 5_000;

pub struct Rules {
    pub per_client: u32,
    pub total: u32,
    pub hold_down_ms: u64,
    /// The hold-down before the last reload, and when that was: a move decided before it was
    /// held by the old one (the status gives its time to the second, so the lesser of the two
    /// applies near the reload).
    old_hold_down_ms: u64,
    reloaded_at: Option<u64>,
    /// The rate limits' buckets, as the frames on the wire spend them.
    pub limits: Limits,
    /// rlbd's moves as its updates show them.
    pub moves: Moves,
    /// The first update of a frame handed out now went out when its move was decided.
    pub prompt: bool,
    /// When the engine under test was made (a restart makes a new one): answers the host gave
    /// before it are not its to know.
    pub engine_started: u64,
    /// The engine was restarted with the state file at this time, and the file was written
    /// then: the first status 2 s on (its clients counted again) must show every move made
    /// before the file was written still held.
    pub restored: Option<(u64, u64)>,
    /// Once settled, no port over its threshold while another has room.
    pub balance: Balance,
    /// The guests' rules (`guest_rules.rs`), on the seeds with guests.
    pub guests: super::guest_rules::GuestRules,
    /// Figures for the report.
    pub frames_checked: u64,
    pub advertisements_checked: u64,
    pub tagged_checked: u64,
    /// The addresses `[clients]` excludes: their clients are never sent a frame, and are left
    /// where the kernel puts them.
    pub excluded: Vec<std::net::Ipv4Addr>,
}

/// How long a client the engine knows may stay on a dead port.
pub const DEAD_PORT_GRACE_MS: u64 = 1_000;

impl Rules {
    pub fn new(per_client: u32, total: u32, policy: &rlbd::policy::PolicyConfig) -> Rules {
        Rules {
            guests: Default::default(),
            balance: Balance::new(policy),
            per_client,
            total,
            hold_down_ms: policy.hold_down * 1000,
            old_hold_down_ms: policy.hold_down * 1000,
            reloaded_at: None,
            limits: Limits::new(per_client, total),
            moves: Moves::default(),
            prompt: true,
            engine_started: 0,
            restored: None,
            frames_checked: 0,
            advertisements_checked: 0,
            tagged_checked: 0,
            excluded: Vec::new(),
        }
    }

    /// Whether `[clients]` excludes `c` (by the IPv4 address it uses).
    pub fn excludes(&self, c: &rlbd::simulate::lan::clients::Client) -> bool {
        c.ip6.is_none() && self.excluded.contains(&c.ip)
    }

    /// A restart without the state file: the engine rightly forgets budgets and hold-downs.
    pub fn forget(&mut self, now: u64) {
        self.limits.reset(now, self.per_client, self.total);
        self.moves.forget();
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
        self.limits.reset(now, per_client, total);
    }

    /// A frame the engine sent and the kernel took, out of `port`.
    pub fn on_sent(
        &mut self,
        now: u64,
        world: &World,
        port: usize,
        bytes: &[u8],
    ) -> Result<(), (Check, String)> {
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
                return own.then_some(()).ok_or_else(|| {
                    let why = format!("frame on {port} neither ARP, NA nor learning: {f:?}");
                    (Check::FrameShape, why)
                });
            }
        };
        if let Some(c) = world
            .clients
            .iter()
            .find(|c| c.mac == eth_dst && self.excludes(c))
        {
            let why = format!("a frame to {eth_dst} ({}), which [clients] excludes", c.ip);
            return Err((Check::Excluded, why));
        }
        let (hold, old, reloaded) = (self.hold_down_ms, self.old_hold_down_ms, self.reloaded_at);
        let hold_at = move |at| hold_down_at(hold, old, reloaded, at);
        let key = (eth_dst, vlan);
        self.stable_target(now, world, key, port)
            .map_err(|e| (Check::Flap, e))?;
        let moved = self
            .moves
            .on_update(now, world, key, port, self.prompt, hold_at);
        moved.map_err(|e| (Check::HoldDown, e))
    }

    /// rlbd's ARP update: from the port, claiming the address the client talks to, tagged for
    /// its VLAN, to a client the server's neighbour table confirms. Its destination.
    fn check_arp(
        &self,
        world: &World,
        port: usize,
        vlan: u16,
        f: Option<Frame>,
    ) -> Result<Mac, (Check, String)> {
        let pmac = world.ports[port].mac;
        let shape = |why: String| (Check::FrameShape, why);
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
            return Err(shape(format!("not ARP: {f:?}")));
        };
        // The address it claims is the one the client talks to (several are the server's); a
        // client gone from its slot (a new MAC took it) still has the server's entry for a while.
        let client = world.clients.iter().find(|c| c.mac == eth_dst);
        let talks = match client {
            Some(c) => c.server == spa && c.vlan == vlan,
            None => [SERVER, SERVER_B, SERVER_V].contains(&spa),
        };
        if !talks || (op == 2 && tpa != spa) || eth_src != pmac || sha != pmac {
            return Err(shape(format!(
                "ARP claims beyond the client's server address or the port: {f:?} on port {port}"
            )));
        }
        // At the client's IPv4 address, not only its MAC: a dual-stack client the server
        // knows by its IPv6 address alone is not confirmed for an ARP update.
        let confirmed = match client {
            Some(c) => world.confirms_at(c.ip.into(), eth_dst),
            None => world.confirms(eth_dst),
        };
        if !confirmed {
            let at = client.map(|c| c.ip.to_string()).unwrap_or_default();
            return Err((
                Check::Confirm,
                format!(
                    "ARP to {eth_dst} (at {at}), which the server's neighbour table does not \
                     confirm at that address"
                ),
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
    ) -> Result<Mac, (Check, String)> {
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
            return Err((Check::FrameShape, format!("not ND: {f:?}")));
        };
        // A client gone from its slot (a new MAC took it) has the server's entry for a while.
        let on_vlan = world
            .clients
            .iter()
            .find(|c| c.mac == eth_dst)
            .is_none_or(|c| c.vlan == vlan);
        let ours = kind == NdKind::Na && target == SERVER6 && src_ip == SERVER6;
        if !ours || eth_src != pmac || lladdr != Some(pmac) || !override_flag || !on_vlan {
            return Err((
                Check::FrameShape,
                format!(
                    "NA claims beyond the server's address or port, or without Override: {f:?} \
                     on port {port}"
                ),
            ));
        }
        if !world.confirms_at(dst_ip.into(), eth_dst) {
            return Err((
                Check::Confirm,
                format!(
                    "NA to {dst_ip} at {eth_dst}, which the server's neighbour table does not \
                     confirm"
                ),
            ));
        }
        self.advertisements_checked += 1;
        Ok(eth_dst)
    }

    /// After a second: the status's word on the table, on moves kept over a restart, dead
    /// ports and balance.
    pub fn after_second(
        &mut self,
        now: u64,
        world: &World,
        st: &StatusReport,
    ) -> Result<(), (Check, String)> {
        let t = &st.totals;
        if t.clients_tracked > t.table_capacity {
            let why = format!(
                "{} clients tracked > table {}",
                t.clients_tracked, t.table_capacity
            );
            return Err((Check::Table, why));
        }
        if let Some((_, written)) = self.restored.filter(|(t, _)| now >= t + 2_000) {
            self.restored = None;
            self.held_moves_survived(now, written, world, st)
                .map_err(|e| (Check::StateFile, e))?;
        }
        self.balance
            .check(now, world, st)
            .map_err(|e| (Check::Balance, e))?;
        // The narrower rule first: a client the host's frames put on the dead port is the
        // answered clients' failover's to move (the sampled seed 2 strands one that is both).
        self.answered_on_dead_ports(now, world)
            .map_err(|e| (Check::AnsweredFailover, e))?;
        self.dead_ports(now, world, st)
            .map_err(|e| (Check::DeadPort, e))
    }

    /// After a restart with the state file, every client the status lists whose move (as its
    /// updates showed it) was in the file and is still the engine's to keep (in its hold-down,
    /// or its client busy since) is still shown moved: taken over, not forgotten.
    fn held_moves_survived(
        &self,
        now: u64,
        written: u64,
        world: &World,
        st: &StatusReport,
    ) -> Result<(), String> {
        let unmoved: HashSet<String> = st
            .clients
            .iter()
            .filter(|c| c.moved.is_none())
            .map(|c| format!("{} {}", c.mac, c.vlan))
            .collect();
        // A move after the file was written is not in it (it is written within a second); one
        // to a port released from the bond while the daemon was down is rightly dropped.
        let in_file = self
            .moves
            .kept(now, self.hold_down_ms)
            .filter(|m| m.2 < written && world.ports[m.3].enslaved);
        for (mac, vlan, at, _) in in_file {
            let key = format!("{mac} {vlan}");
            if unmoved.contains(&key) {
                return Err(format!(
                    "{key}: its move at {at} ms, in the state file, is gone after a restart \
                     with it"
                ));
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
        let ours = |c: &&rlbd::simulate::lan::clients::Client| c.present && !self.excludes(c);
        for cl in world.clients.iter().filter(ours) {
            let Some(e) = cl.entry.filter(|e| e.updated >= self.engine_started) else {
                continue;
            };
            let Some(p) = world.port_of_mac(e.mac) else {
                continue;
            };
            let port = &world.ports[p];
            // A port that died while the daemon was down counts from its start.
            let since = port.down_since.max(self.engine_started);
            if port.up || now < since + DEAD_PORT_GRACE_MS + turns {
                continue;
            }
            if e.updated < port.down_since && world.claimable(cl) {
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
            // A port that died while the daemon was down counts from its start.
            let since = port.down_since.max(self.engine_started);
            if port.up || now < since + DEAD_PORT_GRACE_MS + turns {
                continue;
            }
            let mac = cl.mac.to_string();
            if known.contains(mac.as_str()) && world.claimable(cl) {
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

impl Rules {
    /// A port back from a flap takes no client rlbd moves for `STABLE_MS` while another port
    /// has been up that long: a link that flaps would take clients on and drop them again. A
    /// port this engine never saw down (up at its start, or a new slave) is stable at once.
    fn stable_target(
        &self,
        now: u64,
        world: &World,
        key: (Mac, u16),
        port: usize,
    ) -> Result<(), String> {
        let back = world.ports[port].up_since;
        let unstable = back > self.engine_started && now < back + STABLE_MS;
        if !unstable || self.moves.told_port(key) == Some(port) || self.moves.restoring(now) {
            return Ok(());
        }
        let stable = |q: &rlbd::simulate::lan::ports::Port| {
            q.live() && (q.up_since <= self.engine_started || now >= q.up_since + STABLE_MS)
        };
        let other = world
            .ports
            .iter()
            .enumerate()
            .find(|(i, q)| *i != port && stable(q));
        let Some((_, other)) = other else {
            return Ok(());
        };
        Err(format!(
            "{} {}: moved to {} {} ms after it came back, while {} was up and stable",
            key.0,
            key.1,
            world.ports[port].name,
            now - back,
            other.name
        ))
    }
}

/// The hold-down in force for a move decided at `at`: near a reload, the lesser of the old and
/// the new one (the engine holds a move by the one in force when it asks).
fn hold_down_at(hold: u64, old: u64, reloaded: Option<u64>, at: u64) -> u64 {
    match reloaded {
        Some(r) if at < r + 2_000 => hold.min(old),
        _ => hold,
    }
}
