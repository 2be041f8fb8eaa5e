//! Where the steering core sees ports and clients: which ports are up and since when, which
//! may take clients (a port just back up waits [`STABLE_MS`]), and the port a client's traffic
//! uses now.

use super::{ClientKey, ClientSnap, Ctx, Moved, PortIndex, Steerer, STABLE_MS};
use crate::policy::PortView;

/// A client's rate covers the last whole second, measured up to 200 ms (the evaluation delay)
/// before it is used: frames counted in it may be up to this old.
pub(super) const RATE_WINDOW_MS: u64 = 1500;

/// How long a client quiet since is still taken to send where it was last counted.
pub(super) const COUNTED_LATELY_SECS: u64 = 5;

/// Whether `c`'s latest counted frames surely came after `since_ms`: its rate's (the last
/// second, up to [`RATE_WINDOW_MS`] old), or a quiet client's counted `quiet_secs` whole
/// seconds before that, within [`COUNTED_LATELY_SECS`].
fn counted_since(c: &ClientSnap, since_ms: u64, now: u64) -> bool {
    let quiet = if c.rate_bps > 0.0 { 0 } else { c.quiet_secs };
    quiet <= COUNTED_LATELY_SECS && now.saturating_sub(since_ms) >= RATE_WINDOW_MS + quiet * 1000
}

/// How long a client a failover could not place is retried when its neighbour entry is
/// confirmed (its own ARP or ND would bring it back within its neighbour timers anyway).
const UNPLACED_MS: u64 = 60_000;

impl Steerer {
    /// Notes a client the failover could not move off the dead port `from`; bounded by the
    /// moves the core keeps, the oldest dropped first.
    pub(super) fn note_unplaced(&mut self, now: u64, key: ClientKey, from: PortIndex) {
        self.unplaced
            .retain(|_, (_, at)| now.saturating_sub(*at) <= UNPLACED_MS);
        if self.unplaced.len() >= self.cfg.max_moved.max(1) {
            if let Some(oldest) = self.unplaced.iter().min_by_key(|(_, (_, at))| *at) {
                let k = *oldest.0;
                self.unplaced.remove(&k);
            }
        }
        self.unplaced.insert(key, (from, now));
    }

    /// The dead ports to fail over again because a client the failover could not place there
    /// has a neighbour entry now (`heard(mac)`: an entry of that MAC was just told). Each only
    /// once.
    pub fn retry_unplaced(
        &mut self,
        now: u64,
        heard: impl Fn(crate::Mac) -> bool,
    ) -> Vec<PortIndex> {
        let mut ports: Vec<PortIndex> = Vec::new();
        if self.unplaced.is_empty() {
            return ports;
        }
        self.unplaced.retain(|k, (p, at)| {
            if now.saturating_sub(*at) > UNPLACED_MS {
                return false;
            }
            let retry = heard(k.mac);
            if retry {
                ports.push(*p);
            }
            !retry
        });
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// Port `p` came back at `now` though it never showed down (a flap between two messages):
    /// it is no target until it has been up [`STABLE_MS`].
    pub fn port_back(&mut self, now: u64, p: PortIndex) {
        match self.up_since.get_mut(p) {
            Some(since) => *since = Some(now),
            None => self.back_unseen.push((p, now)),
        }
    }

    /// Notes which ports are up, and since when.
    pub(super) fn note_ports(&mut self, now: u64, ports: &[PortView]) {
        if self.up_since.len() < ports.len() {
            // Ports up when first seen were up before rlbd looked: stable.
            let first: Vec<Option<u64>> = ports[self.up_since.len()..]
                .iter()
                .map(|p| p.up.then_some(0))
                .collect();
            self.up_since.extend(first);
        }
        for (p, at) in self.back_unseen.drain(..) {
            if let Some(since) = self.up_since.get_mut(p) {
                *since = Some(at);
            }
        }
        for (since, p) in self.up_since.iter_mut().zip(ports) {
            *since = match (*since, p.up) {
                (_, false) => None,
                (None, true) => Some(now),
                (Some(t), true) => Some(t),
            };
        }
    }

    /// The planner's view with the ports that came back less than [`STABLE_MS`] ago made no
    /// target (no capacity), as long as another port that is up is stable.
    pub(super) fn stable_targets(&self, now: u64, ports: &[PortView]) -> Vec<PortView> {
        let mut out = Vec::new();
        self.stable_targets_into(now, ports, &mut out);
        out
    }

    /// [`stable_targets`](Self::stable_targets) into a buffer the core keeps.
    pub(super) fn stable_targets_into(
        &self,
        now: u64,
        ports: &[PortView],
        out: &mut Vec<PortView>,
    ) {
        let stable = |i: usize| {
            self.up_since
                .get(i)
                .copied()
                .flatten()
                .is_some_and(|t| now.saturating_sub(t) >= STABLE_MS)
        };
        out.clear();
        out.extend_from_slice(ports);
        if !(0..ports.len()).any(|i| ports[i].up && stable(i)) {
            return;
        }
        for (i, p) in out.iter_mut().enumerate() {
            if p.up && !stable(i) {
                p.capacity_bps = 0.0;
            }
        }
    }

    /// Whether `c`'s frames on the port it was last seen on came after rlbd moved it to
    /// `m.port`. Frames counted before the move say nothing of where it is: it is where rlbd
    /// put it, and a failure of its old port is no reason to move it again (a port removed and
    /// added back failed it over twice, a second port failure thrice). A client quiet in the
    /// last second still counts if its frames were counted there within
    /// [`COUNTED_LATELY_SECS`] and after the move (a small client on a sampled port is kept in
    /// few seconds; the host may have put it back, say by a broadcast request).
    pub(super) fn sent_there_since_move(&self, c: &ClientSnap, m: &Moved, now: u64) -> bool {
        c.port != m.port && counted_since(c, m.at_ms, now)
    }

    /// The port a client rlbd did not move sends to now, for the failover: where it was
    /// counted, unless that port's MAC has since gone to a port that is dead (balance-alb's
    /// swap gives the failed active slave the MAC of the one that takes over) and it was not
    /// counted after that: its frames go to that MAC.
    pub(super) fn unmoved_client_port(
        &self,
        c: &ClientSnap,
        now: u64,
        dead: impl Fn(PortIndex) -> bool,
    ) -> PortIndex {
        self.macs_moved
            .iter()
            .find(|&&(from, to, at)| from == c.port && dead(to) && !counted_since(c, at, now))
            .map_or(c.port, |&(_, to, _)| to)
    }

    /// The port a client rlbd moved sends to now, for the failover: the move's, unless its
    /// frames came in on another port since, or a frame of the host's told it another port's
    /// MAC since its last update and it was not counted after that frame. `c`: its counts, if
    /// the client table still has it.
    pub(super) fn moved_client_port(
        &self,
        c: Option<&ClientSnap>,
        m: &Moved,
        now: u64,
        ctx: &Ctx,
        dead: impl Fn(PortIndex) -> bool,
    ) -> PortIndex {
        if dead(m.port) {
            return m.port;
        }
        if let Some(c) = c.filter(|c| self.sent_there_since_move(c, m, now)) {
            return c.port;
        }
        let told = m
            .undone
            .filter(|(_, at)| !c.is_some_and(|c| counted_since(c, *at, now)))
            .and_then(|(mac, _)| ctx.ports.iter().position(|p| p.mac == mac));
        told.unwrap_or(m.port)
    }

    /// Where a client's traffic goes now: the port its latest frame came in on, unless that
    /// port is down and rlbd has since put the client on a live one (an idle client sends no
    /// frame to tell). Without this a quiet client on a dead port is moved again every second.
    pub(super) fn current_port(
        c: &ClientSnap,
        moved: Option<&Moved>,
        ports: &[PortView],
    ) -> PortIndex {
        let up = |p: PortIndex| ports.get(p).is_some_and(|v| v.up);
        match moved {
            Some(m) if !up(c.port) && up(m.port) => m.port,
            _ => c.port,
        }
    }
}
