//! The hold-down: a client rlbd moved stays where it was put for `hold_down` seconds (its
//! second move within them only as a settling correction, never back where it came from), and
//! a guest likewise. The steering core keeps when each client moved; the guests' table when each
//! guest did; both ask here whether that move still holds.

/// The hold-down in force, ms (none by default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HoldDown {
    ms: u64,
}

impl HoldDown {
    pub fn from_secs(secs: u64) -> HoldDown {
        HoldDown {
            ms: secs.saturating_mul(1000),
        }
    }

    pub fn from_ms(ms: u64) -> HoldDown {
        HoldDown { ms }
    }

    pub fn ms(self) -> u64 {
        self.ms
    }

    /// Whether a move made at `moved_ms` still holds at `now`.
    pub fn holds(self, moved_ms: u64, now: u64) -> bool {
        now.saturating_sub(moved_ms) < self.ms
    }
}

/// Whole seconds since a move made at `moved_ms`, rounded to the nearest: the planner's
/// clean-second rule (`SETTLE_SECS`) and the settling window read it.
pub fn since_move_secs(moved_ms: u64, now: u64) -> u64 {
    (now.saturating_sub(moved_ms) + 500) / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_holds_until_its_hold_down_is_over() {
        let h = HoldDown::from_secs(30);
        assert!(h.holds(1_000, 1_000));
        assert!(h.holds(1_000, 30_999));
        assert!(!h.holds(1_000, 31_000));
        // A clock that reads earlier than the move (a state file from another boot) holds.
        assert!(h.holds(5_000, 1_000));
    }

    #[test]
    fn seconds_since_a_move_round_to_the_nearest() {
        assert_eq!(since_move_secs(0, 499), 0);
        assert_eq!(since_move_secs(0, 500), 1);
        assert_eq!(since_move_secs(0, 1_499), 1);
        assert_eq!(since_move_secs(2_000, 1_000), 0);
    }
}
