//! The rate limits as documented, checked at their budget: a token bucket per client and one
//! for all, each holding a second's budget and refilled at it, as the updates the engine sends
//! spend them (each frame's first attempt; a retry after a refusal is the same update). An
//! update that finds no token is one too many. Twice the budget within a second
//! (what the old check allowed) is what a full bucket and its refill give together; this checks
//! every frame against the exact bound instead.

use std::collections::HashMap;

use rlbd::Mac;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: u64,
}

impl Bucket {
    fn full(rate: f64, at: u64) -> Bucket {
        Bucket { tokens: rate, at }
    }

    /// Refills to `now`; true when a token was there to spend (and spends it).
    fn spend(&mut self, now: u64, rate: f64) -> bool {
        let earned = now.saturating_sub(self.at) as f64 / 1000.0 * rate;
        self.tokens = (self.tokens + earned).min(rate);
        self.at = self.at.max(now);
        // The engine's buckets do the same arithmetic; a hair of float is no breach.
        if self.tokens < 1.0 - 1e-9 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }

    fn left(&self, now: u64, rate: f64) -> f64 {
        let earned = now.saturating_sub(self.at) as f64 / 1000.0 * rate;
        (self.tokens + earned).min(rate)
    }
}

pub struct Limits {
    per_client: f64,
    total: f64,
    clients: HashMap<Mac, Bucket>,
    all: Bucket,
    /// The last time a bucket ran low (under two tokens): an update may then rightly be shed.
    pub tight_at: HashMap<Mac, u64>,
    pub all_tight_at: Option<u64>,
    /// A restart with the state file: every budget counts as spent then (the engine's
    /// `start_empty`), a client's refilling from there when first seen.
    empty_from: Option<u64>,
}

impl Limits {
    pub fn new(per_client: u32, total: u32) -> Limits {
        Limits {
            per_client: f64::from(per_client),
            total: f64::from(total),
            clients: HashMap::new(),
            all: Bucket::full(f64::from(total), 0),
            tight_at: HashMap::new(),
            all_tight_at: None,
            empty_from: None,
        }
    }

    /// A new engine that took the state file over: it starts with every budget spent (what
    /// the old one sent since its last write is not known to it).
    pub fn start_empty(&mut self, now: u64) {
        self.clients.clear();
        self.all = Bucket {
            tokens: 0.0,
            at: now,
        };
        self.empty_from = Some(now);
        self.all_tight_at = Some(now);
    }

    /// New budgets (a reload, or an engine without the old one's state): the engine starts
    /// full buckets, so the check does too. When the old budgets ran low stays known: an
    /// update shed a moment before the reload was rightly shed.
    pub fn reset(&mut self, now: u64, per_client: u32, total: u32) {
        let (tight_at, all_tight_at) = (std::mem::take(&mut self.tight_at), self.all_tight_at);
        *self = Limits::new(per_client, total);
        self.all.at = now;
        (self.tight_at, self.all_tight_at) = (tight_at, all_tight_at);
    }

    /// An update to `mac` was sent at `now`.
    pub fn on_sent(&mut self, now: u64, mac: Mac) -> Result<(), String> {
        let per = self.per_client;
        let fresh = match self.empty_from {
            Some(t0) => (now.saturating_sub(t0) as f64 / 1000.0 * per).min(per),
            None => per,
        };
        let b = self.clients.entry(mac).or_insert(Bucket {
            tokens: fresh,
            at: now,
        });
        if !b.spend(now, per) {
            return Err(format!(
                "a frame to {mac} beyond its budget of {per} a second (bucket empty)"
            ));
        }
        if b.tokens < 2.0 {
            self.tight_at.insert(mac, now);
        }
        if !self.all.spend(now, self.total) {
            return Err(format!(
                "a frame to {mac} beyond the total budget of {} a second (bucket empty)",
                self.total
            ));
        }
        if self.all.tokens < 2.0 {
            self.all_tight_at = Some(now);
        }
        Ok(())
    }

    /// Whether an update to `mac` may rightly have been shed since `since` for want of its own
    /// budget (a storm toward it).
    pub fn client_tight_since(&self, mac: Mac, since: u64, now: u64) -> bool {
        let low = self
            .clients
            .get(&mac)
            .is_some_and(|b| b.left(now, self.per_client) < 2.0);
        self.tight_at.get(&mac).is_some_and(|t| *t + 1000 >= since) || low
    }

    /// Whether an update may have had to wait for the shared budget since `since`.
    pub fn all_tight_since(&self, since: u64, now: u64) -> bool {
        self.all_tight_at.is_some_and(|t| t + 1000 >= since) || self.all.left(now, self.total) < 2.0
    }

    /// The spacing of the shared budget's turns, ms.
    pub fn spacing_ms(&self) -> u64 {
        ((1000.0 / self.total.max(1.0)).ceil() as u64).max(1)
    }
}
