//! Token buckets that keep updates from becoming a storm: one per client and one for all.
//! Time is passed in (milliseconds), so the limiter is plain data and tests need no clock.

use std::collections::HashMap;

use crate::Mac;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at_ms: u64,
}

impl Bucket {
    /// Adds the tokens earned since the last look; true when one is there to take.
    fn refill(&mut self, now_ms: u64, per_sec: f64, burst: f64) -> bool {
        let elapsed = now_ms.saturating_sub(self.at_ms) as f64 / 1000.0;
        self.tokens = (self.tokens + elapsed * per_sec).min(burst);
        self.at_ms = self.at_ms.max(now_ms);
        self.tokens >= 1.0
    }
}

/// Whether an update may go now, and if not, which limit stopped it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Yes,
    /// The client's own budget is spent: a storm toward it, shed.
    Client,
    /// The shared budget is spent (or every tracked client is mid-burst): the update could go
    /// a little later.
    Busy,
}

#[derive(Debug)]
pub struct Limiter {
    per_client: f64,
    total: f64,
    clients: HashMap<Mac, Bucket>,
    all: Bucket,
    max_clients: usize,
    /// Set by [`start_empty`](Self::start_empty): every budget counts as spent at this time.
    empty_from: Option<u64>,
}

impl Limiter {
    /// `max_clients` bounds the map; it is cleared of full buckets when it fills.
    pub fn new(per_client_per_sec: u32, total_per_sec: u32, max_clients: usize) -> Self {
        Self {
            per_client: f64::from(per_client_per_sec),
            total: f64::from(total_per_sec),
            clients: HashMap::new(),
            all: Bucket {
                tokens: f64::from(total_per_sec),
                at_ms: 0,
            },
            max_clients: max_clients.max(1),
            empty_from: None,
        }
    }

    /// Every budget, the shared one and each client's (also of clients first seen later),
    /// counts as spent at `now_ms` and refills from there. For a daemon taking over from an
    /// earlier one: what that one sent since it last wrote its state (up to a second's worth
    /// of both budgets) is not known, and starting full would let the two together send twice
    /// the budgets within a second.
    pub fn start_empty(&mut self, now_ms: u64) {
        self.empty_from = Some(now_ms);
        self.all = Bucket {
            tokens: 0.0,
            at_ms: now_ms,
        };
        self.clients.clear();
    }

    /// A client's budget when it is first tracked at `now_ms`: full, or what it has earned
    /// since [`start_empty`](Self::start_empty).
    fn fresh(&self, now_ms: u64) -> f64 {
        match self.empty_from {
            Some(t0) => {
                (now_ms.saturating_sub(t0) as f64 / 1000.0 * self.per_client).min(self.per_client)
            }
            None => self.per_client,
        }
    }

    /// True when one more update to `client` may go now (the caller counts both outcomes).
    pub fn allow(&mut self, client: Mac, now_ms: u64) -> bool {
        self.admit(client, now_ms) == Admit::Yes
    }

    /// Takes a token from the client's and the shared budget when both have one; takes
    /// nothing otherwise, so an update refused for the shared budget and tried again later has
    /// not spent the client's.
    pub fn admit(&mut self, client: Mac, now_ms: u64) -> Admit {
        if self.clients.len() >= self.max_clients && !self.clients.contains_key(&client) {
            let (per, cap) = (self.per_client, self.per_client);
            self.clients.retain(|_, b| {
                let mut probe = *b;
                probe.tokens = (probe.tokens
                    + now_ms.saturating_sub(probe.at_ms) as f64 / 1000.0 * per)
                    .min(cap);
                probe.tokens < cap
            });
        }
        if self.clients.len() >= self.max_clients && !self.clients.contains_key(&client) {
            // Every tracked client is mid-burst: refusing a newcomer keeps both the map and the
            // wire bounded.
            return Admit::Busy;
        }
        let (per, fresh) = (self.per_client, self.fresh(now_ms));
        let bucket = self.clients.entry(client).or_insert(Bucket {
            tokens: fresh,
            at_ms: now_ms,
        });
        // The client's bucket is checked first so a suppressed client does not use the shared
        // budget.
        if !bucket.refill(now_ms, per, per) {
            return Admit::Client;
        }
        if !self.all.refill(now_ms, self.total, self.total) {
            return Admit::Busy;
        }
        bucket.tokens -= 1.0;
        self.all.tokens -= 1.0;
        Admit::Yes
    }

    /// Milliseconds between two updates at the shared budget's rate (at least 1).
    pub fn spacing_ms(&self) -> u64 {
        ((1000.0 / self.total.max(1.0)).ceil() as u64).max(1)
    }

    /// The clients whose own budget is not full at `now_ms`: (client, tokens left). What a
    /// restarted daemon must not hand out afresh.
    pub fn spent(&self, now_ms: u64) -> Vec<(Mac, f64)> {
        let per = self.per_client;
        self.clients
            .iter()
            .filter_map(|(m, b)| {
                let mut probe = *b;
                probe.refill(now_ms, per, per);
                (probe.tokens < per).then_some((*m, probe.tokens))
            })
            .collect()
    }

    /// A client's budget as an earlier daemon left it (`tokens` at `now_ms`).
    pub fn restore(&mut self, client: Mac, tokens: f64, now_ms: u64) {
        if self.clients.len() < self.max_clients {
            let tokens = tokens.clamp(0.0, self.per_client).min(self.fresh(now_ms));
            self.clients.insert(
                client,
                Bucket {
                    tokens,
                    at_ms: now_ms,
                },
            );
        }
    }

    pub fn tracked(&self) -> usize {
        self.clients.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_client_burst_then_refill() {
        let mut l = Limiter::new(4, 1000, 100);
        let c = [2, 0, 0, 0, 0, 1];
        assert_eq!((0..10).filter(|_| l.allow(Mac::from(c), 0)).count(), 4);
        assert!(!l.allow(Mac::from(c), 100));
        assert!(
            l.allow(Mac::from(c), 300),
            "a quarter second buys one more at 4/s"
        );
    }

    #[test]
    fn total_budget_caps_many_clients() {
        let mut l = Limiter::new(4, 10, 1000);
        let ok = (0..100u8)
            .filter(|i| l.allow(Mac(2, 0, 0, 0, 0, *i), 0))
            .count();
        assert_eq!(ok, 10);
    }

    #[test]
    fn a_refusal_for_the_shared_budget_spends_nothing_of_the_clients() {
        let mut l = Limiter::new(2, 1, 100);
        let (a, b) = (Mac(2, 0, 0, 0, 0, 1), Mac(2, 0, 0, 0, 0, 2));
        assert_eq!(l.admit(a, 0), Admit::Yes);
        // The shared budget (1/s) is spent: b waits, ten times over, and keeps its own two.
        for t in 0..10 {
            assert_eq!(l.admit(b, t), Admit::Busy);
        }
        assert_eq!(l.clients[&b].tokens, 2.0);
        assert_eq!(l.admit(b, 1000), Admit::Yes);
        assert_eq!(l.admit(a, 1000), Admit::Busy);
        let mut l = Limiter::new(2, 1000, 100);
        assert_eq!(l.admit(b, 0), Admit::Yes);
        assert_eq!(l.admit(b, 0), Admit::Yes);
        assert_eq!(l.admit(b, 0), Admit::Client, "b's own two are spent");
        assert_eq!(Limiter::new(2, 1, 100).spacing_ms(), 1000);
        assert_eq!(Limiter::new(8, 1000, 10).spacing_ms(), 1);
        assert_eq!(Limiter::new(8, 300, 10).spacing_ms(), 4);
    }

    #[test]
    fn a_daemon_taking_over_starts_with_every_budget_spent() {
        // What the one before sent in its last second is not known: across the take-over no
        // second holds more than a full budget and a second's refill, of either budget.
        let mut l = Limiter::new(4, 10, 100);
        let (a, b) = (Mac(2, 0, 0, 0, 0, 1), Mac(2, 0, 0, 0, 0, 2));
        l.restore(a, 4.0, 5_000);
        l.start_empty(5_000);
        l.restore(a, 4.0, 5_000);
        assert_eq!(
            l.admit(a, 5_000),
            Admit::Client,
            "a's restored budget counts as spent"
        );
        assert_eq!(l.admit(b, 5_000), Admit::Client, "so does a newcomer's");
        // A quarter second later each client has earned one update, and the shared budget two.
        assert_eq!(l.admit(a, 5_250), Admit::Yes);
        assert_eq!(l.admit(b, 5_250), Admit::Yes);
        let c = Mac(2, 0, 0, 0, 0, 3);
        assert_eq!(l.admit(c, 5_250), Admit::Busy, "the shared two are spent");
        let sent = (0..100u8)
            .filter(|i| l.allow(Mac(2, 0, 0, 1, 0, *i), 6_000))
            .count();
        assert_eq!(
            sent, 8,
            "the half left and three quarters of a second at 10/s"
        );
    }

    #[test]
    fn client_map_stays_bounded() {
        let mut l = Limiter::new(4, 1_000_000, 64);
        for i in 0..10_000u32 {
            let b = i.to_be_bytes();
            l.allow(
                Mac::from([2, 0, b[0], b[1], b[2], b[3]]),
                u64::from(i) * 1000,
            );
            assert!(l.tracked() <= 64);
        }
        let mut l = Limiter::new(4, 1_000_000, 8);
        let sent = (0..100u8)
            .filter(|i| l.allow(Mac(2, 0, 0, 0, 0, *i), 0))
            .count();
        assert_eq!(
            (sent, l.tracked()),
            (8, 8),
            "a burst of newcomers cannot grow the map"
        );
    }
}
