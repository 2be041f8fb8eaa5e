//! Update frames the kernel refused to send. A transient refusal (ENOBUFS: the port's queue or
//! the socket's buffer is full; EAGAIN; ENOMEM) is retried a few times with a growing delay; a
//! port that is down or gone (ENETDOWN, ENXIO, ENODEV) is not retried: the failover that follows
//! the link's notification steers its clients from a live port. A newer update for the same
//! client supersedes a pending retry (it must never overwrite a later decision), and the queue
//! is bounded, so a port that refuses everything costs a few sends per frame, never a busy loop.
//!
//! The failure log is rate-limited per port: the first refusal is a warning, the rest of
//! [`WARN_EVERY_MS`] only counted (and said in the next warning).
//!
//! Every frame ends sent or refused for good (not retried, tries exhausted, the queue full, or
//! superseded), and the shell tells the steering core which: a move none of whose frames went
//! out was not made.
//!
//! Pure: the shell sends, reports the outcome; the engine asks what is due.

use std::collections::{HashMap, VecDeque};

use crate::client::ClientKey;

/// Delay before each retry, ms: about 1.5 s in all, longer than a queue takes to drain.
pub const DELAYS_MS: [u64; 5] = [50, 100, 200, 400, 800];
/// Frames waiting for a retry at most; more refusals are dropped (and counted).
pub const MAX_QUEUED: usize = 1024;
/// One warning per port per this long.
pub const WARN_EVERY_MS: u64 = 10_000;

/// What the engine keeps about things going wrong around it: foreign claims of the server's
/// addresses, seconds whose client rates a capture ring's drops made unusable, timers the loop
/// ran late. (Refused sends are the `Sender`'s.)
#[derive(Debug, Default)]
pub struct Trouble {
    pub foreign: crate::steer::foreign::ForeignClaims,
    /// The second being evaluated had ring drops: its client rates are incomplete.
    pub rates_unreliable: bool,
    pub unreliable_seconds: u64,
    /// The most a due timer waited for the loop, ms, and how many waited over 100 ms.
    pub late_max_ms: u64,
    pub late: u64,
}

impl Trouble {
    /// A timer due at `due_ms` runs at `now_ms`.
    pub fn timer_ran(&mut self, due_ms: u64, now_ms: u64) {
        let late = now_ms.saturating_sub(due_ms);
        self.late_max_ms = self.late_max_ms.max(late);
        if late > 100 {
            self.late += 1;
        }
    }
}

/// One update frame on its way out: where, to whom, for which move of the steering core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub port: usize,
    pub client: ClientKey,
    /// The client's address the frame is for: a retry goes out only while the kernel still
    /// confirms the client there.
    pub to: std::net::IpAddr,
    pub move_id: u64,
    pub frame: Vec<u8>,
}

/// One frame waiting for another try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub due_ms: u64,
    /// Tries made so far (1 after the first refusal).
    pub tries: usize,
    pub update: Update,
}

/// What became of a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// `Some(refusals since the last warning)` when this one should be logged as a warning.
    pub warn: Option<u64>,
    /// Queued for another try; otherwise refused for good.
    pub retrying: bool,
}

/// Whether an errno is worth another try later.
pub fn transient(errno: Option<i32>) -> bool {
    matches!(
        errno,
        Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::ENOMEM) | Some(libc::EINTR)
    )
}

#[derive(Debug, Default)]
pub struct Retries {
    queue: VecDeque<Pending>,
    errors: u64,
    retried: u64,
    dropped: u64,
    /// Per port: when the last warning was logged, refusals since then.
    warned: HashMap<usize, (u64, u64)>,
}

impl Retries {
    /// A newer frame for `client` is about to go out: older retries for it are void. Returns
    /// their move numbers (each a frame refused for good).
    pub fn supersede(&mut self, client: ClientKey) -> Vec<u64> {
        let mut void = Vec::new();
        self.queue.retain(|p| {
            let keep = p.update.client != client;
            if !keep {
                void.push(p.update.move_id);
            }
            keep
        });
        void
    }

    /// The kernel refused `update` after `tries` tries (1 for a first send). Queues a retry
    /// when the error is transient and tries are left.
    pub fn failed(
        &mut self,
        now_ms: u64,
        update: Update,
        tries: usize,
        errno: Option<i32>,
    ) -> Refusal {
        self.errors += 1;
        let port = update.port;
        let mut retrying = false;
        if transient(errno) {
            match DELAYS_MS.get(tries - 1) {
                Some(delay) if self.queue.len() < MAX_QUEUED => {
                    self.queue.push_back(Pending {
                        due_ms: now_ms + delay,
                        tries,
                        update,
                    });
                    retrying = true;
                }
                _ => self.dropped += 1,
            }
        }
        let (at, since) = self.warned.entry(port).or_insert((0, 0));
        *since += 1;
        let warn = if *at == 0 || now_ms.saturating_sub(*at) >= WARN_EVERY_MS {
            let n = *since;
            *at = now_ms.max(1);
            *since = 0;
            Some(n)
        } else {
            None
        };
        Refusal { warn, retrying }
    }

    /// The retries due at `now_ms`, in order; each counts as retried.
    pub fn due(&mut self, now_ms: u64) -> Vec<Pending> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.queue.len() {
            if self.queue[i].due_ms <= now_ms {
                if let Some(p) = self.queue.remove(i) {
                    out.push(p);
                }
            } else {
                i += 1;
            }
        }
        self.retried += out.len() as u64;
        out
    }

    /// When the next retry is due.
    pub fn next_due(&self) -> Option<u64> {
        self.queue.iter().map(|p| p.due_ms).min()
    }

    /// Refusals since start (first tries and retries).
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// Retries made.
    pub fn retried(&self) -> u64 {
        self.retried
    }

    /// Refused frames given up on (tries exhausted, or the queue full).
    #[cfg(test)]
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    #[cfg(test)]
    pub fn queued(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::Mac;

    const C: ClientKey = ClientKey::untagged(Mac(2, 0, 0, 0, 0, 1));
    const D: ClientKey = ClientKey::new(Mac(2, 0, 0, 0, 0, 2), 100);

    fn up(port: usize, client: ClientKey, frame: Vec<u8>) -> Update {
        Update {
            port,
            client,
            to: std::net::Ipv4Addr::new(198, 18, 0, 11).into(),
            move_id: 7,
            frame,
        }
    }

    #[test]
    fn transient_refusals_back_off_then_give_up() {
        let mut r = Retries::default();
        let mut now = 0;
        let mut tries = 1;
        r.failed(now, up(1, C, vec![1]), tries, Some(libc::ENOBUFS));
        let mut sent_at = Vec::new();
        while let Some(due) = r.next_due() {
            now = due;
            for p in r.due(now) {
                sent_at.push(now);
                tries = p.tries + 1;
                r.failed(now, p.update, tries, Some(libc::ENOBUFS));
            }
        }
        assert_eq!(sent_at, vec![50, 150, 350, 750, 1550]);
        assert_eq!(r.errors(), 6);
        assert_eq!(r.retried(), 5);
        assert_eq!(r.dropped(), 1);
    }

    #[test]
    fn a_down_port_is_not_retried_and_a_newer_update_wins() {
        let mut r = Retries::default();
        assert!(
            !r.failed(0, up(1, C, vec![1]), 1, Some(libc::ENETDOWN))
                .retrying
        );
        assert_eq!(r.queued(), 0);
        r.failed(0, up(1, C, vec![1]), 1, Some(libc::ENOBUFS));
        r.failed(0, up(1, D, vec![2]), 1, Some(libc::ENOBUFS));
        assert_eq!(r.supersede(C), vec![7]);
        let due = r.due(1_000);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].update.client, D);
    }

    #[test]
    fn warnings_are_rate_limited_per_port() {
        let mut r = Retries::default();
        assert_eq!(
            r.failed(5, up(0, C, vec![]), 1, Some(libc::ENETDOWN)).warn,
            Some(1)
        );
        for t in 6..100 {
            assert_eq!(
                r.failed(t, up(0, C, vec![]), 1, Some(libc::ENETDOWN)).warn,
                None
            );
        }
        assert_eq!(
            r.failed(50, up(1, C, vec![]), 1, Some(libc::ENETDOWN)).warn,
            Some(1)
        );
        assert_eq!(
            r.failed(5 + WARN_EVERY_MS, up(0, C, vec![]), 1, Some(libc::ENETDOWN))
                .warn,
            Some(95)
        );
    }

    #[test]
    fn the_queue_is_bounded() {
        let mut r = Retries::default();
        for i in 0..(MAX_QUEUED + 10) {
            r.failed(0, up(0, C, vec![]), 1, Some(libc::ENOBUFS));
            assert!(r.queued() <= MAX_QUEUED, "at {i}");
        }
        assert_eq!(r.dropped(), 10);
    }
}
