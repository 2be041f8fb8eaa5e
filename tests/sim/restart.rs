//! A restart of the daemon, as systemd does it after a crash or an upgrade: the old engine
//! stops at once, nothing watches the LAN for 1 to 10 s (frames, netlink and counts are lost),
//! and a new engine starts from a dump, taking the state file over through its bytes.

use rlbd::engine::{Engine, Input, Persisted};

use super::driver::Driver;

impl Driver {
    /// The daemon stops now and comes back `down_ms` later, with the last state file or
    /// without it.
    pub fn restart(&mut self, with_state: bool, down_ms: u64) {
        if self.down.is_some() {
            return;
        }
        self.stats.restarts += 1;
        self.trace.note(self.now, || {
            format!("the daemon stops for {down_ms} ms (state file: {with_state})")
        });
        // A move made since the last write dies with this daemon (it writes within a second
        // of one): the new one is held to the file it finds, not to that move.
        self.rules.moves.last_change = 0;
        let back = self.now + down_ms;
        self.down = Some((back, with_state));
        // What the host does while nobody watches is the new engine's to find out.
        self.restarted_at = back;
        if down_ms == 0 {
            self.come_up();
        }
    }

    /// Brings the daemon back when its downtime is over.
    pub fn come_up_if_due(&mut self) {
        if self.down.is_some_and(|(back, _)| self.now >= back) {
            self.come_up();
        }
    }

    fn come_up(&mut self) {
        let Some((_, with_state)) = self.down.take() else {
            return;
        };
        self.trace
            .note(self.now, || format!("restart (state file: {with_state})"));
        self.engine = Engine::new(self.settings.clone(), self.now);
        self.rules.engine_started = self.now;
        if let Some(m) = self.mutate {
            m.apply(&mut self.engine);
        }
        self.start_engine();
        if !with_state {
            self.state = None;
            self.rules.forget(self.now);
            return;
        }
        let Some(state) = self.state_from_disk() else {
            self.rules.forget(self.now);
            return;
        };
        // The engine takes a file younger than the hold-down over, and then starts with its
        // update budgets spent.
        let hold = self.settings.policy.hold_down * 1000;
        let taken = self.now.saturating_sub(state.written_ms) < hold;
        if taken {
            self.rules.moves.taken_over(self.now, state.written_ms);
            self.rules.limits.start_empty(self.now);
            self.rules.restored = Some((self.now, state.written_ms));
        } else {
            // Too old: the engine starts afresh, as without one.
            self.rules.forget(self.now);
        }
        self.stats.restores += 1;
        let file = "/run/rlbd/sim.state".to_string();
        self.input(Input::Restore {
            state: Box::new(state),
            file,
        });
    }

    /// The last state file the engine handed out, written as the daemon writes it and read
    /// back as a new daemon reads it (JSON, through its bytes).
    fn state_from_disk(&mut self) -> Option<Persisted> {
        let state = self.state.as_ref()?;
        let bytes = match serde_json::to_vec(state) {
            Ok(b) => b,
            Err(e) => {
                let why = format!("the state file does not serialize: {e}");
                self.fail(super::checks::Check::StateFile, why);
                return None;
            }
        };
        match serde_json::from_slice::<Persisted>(&bytes) {
            Ok(back) if same(&back, state) => Some(back),
            Ok(back) => {
                let why = format!("the state file reads back otherwise: {back:?}");
                self.fail(super::checks::Check::StateFile, why);
                None
            }
            Err(e) => {
                let why = format!("the state file ({} bytes) does not parse: {e}", bytes.len());
                self.fail(super::checks::Check::StateFile, why);
                None
            }
        }
    }
}

/// The same state, but for the budgets' token counts to within a millionth: JSON carries an
/// `f64` in its shortest decimal form, which parses back to a neighbour (7.4399999999999995
/// reads as 7.44) without serde_json's `float_roundtrip`; a budget a hair fuller is harmless.
fn same(a: &Persisted, b: &Persisted) -> bool {
    let round = |p: &Persisted| {
        let mut p = p.clone();
        for x in &mut p.budgets {
            x.tokens = (x.tokens * 1e6).round() / 1e6;
        }
        p
    };
    round(a) == round(b)
}
