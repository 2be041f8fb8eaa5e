//! rlbd's moves as the wire shows them: the port each update sent to a client names, and when.
//! Two checks read them, neither from the engine's own word:
//!
//! - **Hold-down.** A client's port changes by rlbd's updates at most twice per hold-down: a
//!   move, then at most one correction (`Settle`), not back to the port the move took it off;
//!   a failover (its port went down) is free but starts a hold-down of its own. Times are the
//!   updates' own, exactly: a move whose first update went out at its decision (not later, for
//!   a retry or a turn of the total rate limit) holds its client until that time plus the
//!   hold-down, to the millisecond.
//! - **Re-assertion.** A frame of the host (a probe, the bond's driver) that puts a client rlbd
//!   moved back on another port is answered by rlbd's update again within two seconds, unless
//!   the client's own rate limit, the neighbour table, a refusing kernel or an idle client
//!   excuse it; one that found the shared budget spent waits its turn, a turn for each move
//!   held at most.

use std::collections::HashMap;

use rlbd::Mac;

use rlbd::simulate::lan::World;

type Key = (Mac, u16);

/// The engine's idle timeout (`[capture] idle_timeout_secs`): a move whose client is out of
/// the table is forgotten once this old.
const IDLE_MS: u64 = 60_000;

#[derive(Debug, Clone, Copy)]
struct Told {
    port: usize,
    at: u64,
    /// Its first update went out when it was decided: its time is the move's.
    prompt: bool,
    /// The port the move took the client off, while a correction may still follow.
    left: Option<usize>,
    second_ok: bool,
    failover: bool,
}

#[derive(Default)]
pub struct Moves {
    told: HashMap<Key, Told>,
    /// Clients a host frame put elsewhere, and when.
    undone: HashMap<Key, u64>,
    /// Undoings excused (the budgets ran low, ...): not taken up again.
    excused: HashMap<Key, u64>,
    /// When each client last sent nothing in a second.
    idle_at: HashMap<Key, u64>,
    /// The port each client's traffic last arrived on (what the engine counted).
    pub counted_on: HashMap<Key, usize>,
    /// When the engine last took a state file over: it re-asserts the moves it holds, which
    /// may be older than the last (a move within a second of a kill is not in the file yet).
    restored_at: Option<u64>,
    /// The engine's bound on the moves it keeps (its client table's size): beyond it, it
    /// forgets the oldest.
    pub bound: usize,
    /// The table is smaller than the population: a busy client may be evicted from it, and
    /// then its move forgotten once older than the idle timeout (`IDLE_MS`).
    pub evicting: bool,
    /// When rlbd's updates last named a new port for some client.
    pub last_change: u64,
    pub moves_checked: u64,
    pub corrections: u64,
    pub undone_checked: u64,
}

impl Moves {
    /// A restart without the state file: the engine rightly forgets every move.
    pub fn forget(&mut self) {
        self.told.clear();
        self.undone.clear();
        self.excused.clear();
    }

    /// A restart with the state file written at `written`: its moves are taken over, without
    /// their origin, so none may be corrected within its hold-down.
    pub fn taken_over(&mut self, now: u64, written: u64) {
        self.restored_at = Some(now);
        // A move made after the file was written died with the daemon that made it.
        self.told.retain(|_, t| t.at < written);
        self.undone.clear();
        for t in self.told.values_mut() {
            t.second_ok = false;
        }
    }

    /// The port rlbd's updates last told `key`, if any.
    pub fn told_port(&self, key: Key) -> Option<usize> {
        self.told.get(&key).map(|t| t.port)
    }

    /// The state file's moves are being re-asserted (their times are not known here).
    pub fn restoring(&self, now: u64) -> bool {
        self.restored_at.is_some_and(|r| now < r + 5_000)
    }

    /// An update to `key` naming `port` reached the wire at `now`.
    pub fn on_update(
        &mut self,
        now: u64,
        world: &World,
        key: Key,
        port: usize,
        prompt: bool,
        hold_at: impl Fn(u64) -> u64,
    ) -> Result<(), String> {
        if self.undone.remove(&key).is_some() {
            self.undone_checked += 1;
        }
        let prev = self.told.get(&key).copied();
        if prev.is_some_and(|p| p.port == port) {
            return Ok(());
        }
        let counted = self.counted_on.get(&key).copied();
        // A failover: the client is on a dead port (where it sends, or where its traffic was
        // last counted). Free, and held from now without a correction.
        let sends_to = world
            .clients
            .iter()
            .find(|c| (c.mac, c.vlan) == key)
            .and_then(|c| c.target())
            .and_then(|m| world.port_of_mac(m));
        let dead = |p: Option<usize>| p.is_some_and(|p| !world.ports[p].up);
        // Or, for an update that waited (not sent as it was decided), the port rlbd last told
        // went down lately: a failover's frames wait their turns of the total rate limit, and
        // the bond's driver may have moved the client meanwhile; the port may be back by then
        // (a flap under 3 s, seed 25).
        // Or the port rlbd last told dies this moment: moving the client off it is a failover of
        // rlbd's own placement, wherever the driver has put the client meanwhile (its
        // re-assertion held back by the budgets; seed 3).
        let told_died = prev.is_some_and(|p| {
            let was = &world.ports[p.port];
            let died = was.down_since >= p.at && now < was.down_since + 30_000;
            died && (!prompt || (!was.up && was.down_since == now))
        });
        let failover = dead(sends_to) || dead(counted) || told_died;
        let restoring = self.restored_at.is_some_and(|r| now < r + 5_000);
        if !restoring {
            self.last_change = now;
        }
        if failover {
            let mut t = told(port, now, prompt, None, false);
            t.failover = true;
            self.told.insert(key, t);
            return Ok(());
        }
        let Some(prev) = prev else {
            self.told
                .insert(key, told(port, now, prompt, counted, true));
            return Ok(());
        };
        if restoring {
            // The state file's placement, re-asserted: its time is not known here.
            self.told.insert(key, told(port, now, false, None, false));
            return Ok(());
        }
        self.moves_checked += 1;
        let hold = hold_at(prev.at);
        if prev.prompt && now < prev.at + hold {
            if prev.second_ok && prev.left != Some(port) {
                self.corrections += 1;
                let left = Some(prev.port);
                self.told.insert(key, told(port, now, prompt, left, false));
                return Ok(());
            }
            return Err(format!(
                "{} {}: moved to port {port} at {now} ms, {} ms after its move to port {} at {} \
                 ms (hold-down {hold} ms; {})",
                key.0,
                key.1,
                now - prev.at,
                prev.port,
                prev.at,
                if prev.second_ok {
                    "a correction, but back to the port it left"
                } else {
                    "its correction, or a failover's hold, was spent"
                }
            ));
        }
        self.told.insert(
            key,
            told(port, now, prompt, counted.or(Some(prev.port)), true),
        );
        Ok(())
    }

    /// The time of the oldest move the engine's bound still lets it keep: past the bound it
    /// forgets the oldest moves down to seven eighths of it (never one within its hold-down).
    fn oldest_kept(&self) -> u64 {
        let keep = (self.bound - self.bound / 8).max(1);
        if self.told.len() <= keep {
            return 0;
        }
        let mut at: Vec<u64> = self.told.values().map(|t| t.at).collect();
        at.sort_unstable_by(|a, b| b.cmp(a));
        at[keep - 1]
    }

    /// The moves the engine must still hold at `now` (client, VLAN, when, to which port):
    /// those in their hold-down (its bound
    /// forgets none of them), and those of clients that have sent every second since (an
    /// engine forgets only idle clients' moves, and past its bound the oldest).
    pub fn kept(&self, now: u64, hold: u64) -> impl Iterator<Item = (Mac, u16, u64, usize)> + '_ {
        let oldest = self.oldest_kept();
        self.told
            .iter()
            .filter(move |(k, t)| {
                let busy = self.idle_at.get(k).is_none_or(|i| *i + 120_000 < t.at);
                let old = self.evicting && now >= t.at + IDLE_MS;
                t.at + hold > now || (busy && !old && t.at > oldest)
            })
            .map(|(k, t)| (k.0, k.1, t.at, t.port))
    }

    /// Clients the engine may have seen idle at `now` (too faint for their port's sampling).
    pub fn seen_idle(&mut self, now: u64, keys: &[Key]) {
        for k in keys {
            self.idle_at.insert(*k, now);
        }
    }

    /// After the world's second: the clients a host frame took off rlbd's port, and each
    /// client's traffic.
    pub fn watch(&mut self, now: u64, world: &World) {
        for c in world.clients.iter().filter(|c| c.present) {
            let key = (c.mac, c.vlan);
            if c.delivered_bps <= 0.0 {
                self.idle_at.insert(key, now);
            }
            let Some(t) = self.told.get(&key) else {
                continue;
            };
            let Some(e) = c.entry else { continue };
            let port = &world.ports[t.port];
            let on = world.port_of_mac(e.mac);
            let elsewhere = on.is_some_and(|p| p != t.port);
            // Put elsewhere when its entry changed, or when balance-alb gave the MAC it names to
            // another port (a swap on failover).
            let at = on.map_or(e.updated, |p| e.updated.max(world.ports[p].mac_since));
            let seen = self.undone.contains_key(&key) || self.excused.get(&key) == Some(&at);
            if port.up && elsewhere && at > t.at && !seen {
                self.undone.insert(key, at);
            }
        }
    }

    /// Each undone move is answered within `grace` ms, or excused by `excused(key, since)`.
    /// `hold`: the hold-down, past which a table smaller than the LAN may forget a move.
    pub fn check_reasserted(
        &mut self,
        now: u64,
        world: &World,
        (grace, hold, spacing): (u64, u64, u64),
        excused: impl Fn(Key, u64) -> Excuse,
    ) -> Result<(), String> {
        // The longest a re-assertion may wait for the shared budget: a turn for every move
        // held (each holds at most one), after the grace.
        let turns = grace + self.told.len() as u64 * spacing;
        let mut due: Vec<(Key, u64)> = self
            .undone
            .iter()
            .filter(|(_, t)| now >= **t + grace)
            .map(|(k, t)| (*k, *t))
            .collect();
        due.sort();
        for (key, at) in due {
            self.undone.remove(&key);
            let Some(t) = self.told.get(&key).copied() else {
                continue;
            };
            let port = &world.ports[t.port];
            let idle = self.idle_at.get(&key).is_some_and(|i| *i + 120_000 >= t.at);
            let gone = !world
                .clients
                .iter()
                .any(|c| c.present && (c.mac, c.vlan) == key);
            // Past its hold-down, the engine's bound may forget a move when the table evicts
            // (its moves then outnumber the table's size: which ones it keeps is its own).
            let past = at >= t.at + IDLE_MS.min(hold);
            let forgotten = t.at <= self.oldest_kept() || (self.evicting && past);
            let excuse = if !port.up || port.down_since >= t.at || idle || gone || forgotten {
                Excuse::Yes
            } else {
                excused(key, at)
            };
            let within = match excuse {
                Excuse::Yes => {
                    self.excused.insert(key, at);
                    continue;
                }
                Excuse::Turn if now < at + turns => {
                    self.undone.insert(key, at);
                    continue;
                }
                Excuse::Turn => turns,
                Excuse::No => grace,
            };
            return Err(format!(
                "{} {}: moved to port {} at {} ms, put elsewhere by the host at {at} ms, not \
                 told again within {within} ms{}",
                key.0,
                key.1,
                t.port,
                t.at,
                if within > grace {
                    format!(
                        " (its turn of the total budget, {spacing} ms for each of {} moves)",
                        self.told.len()
                    )
                } else {
                    String::new()
                }
            ));
        }
        Ok(())
    }
}

/// Why an undone move may go untold past the grace.
pub enum Excuse {
    /// It may go untold (its client's own budget ran low, a refusing kernel, a restart, ...).
    Yes,
    /// The shared budget ran low: it waits its turn, and is told within a turn per move held.
    Turn,
    /// Nothing: it is told within the grace.
    No,
}

fn told(port: usize, at: u64, prompt: bool, left: Option<usize>, second_ok: bool) -> Told {
    Told {
        port,
        at,
        prompt,
        left,
        second_ok,
        failover: false,
    }
}
