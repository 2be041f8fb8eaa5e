//! Token buckets that keep updates from becoming a storm: one per client and one for all.
//! Time is passed in (milliseconds), so the limiter is plain data and tests need no clock.

use std::collections::HashMap;

use super::arp::Mac;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at_ms: u64,
}

impl Bucket {
    fn take(&mut self, now_ms: u64, per_sec: f64, burst: f64) -> bool {
        let elapsed = now_ms.saturating_sub(self.at_ms) as f64 / 1000.0;
        self.tokens = (self.tokens + elapsed * per_sec).min(burst);
        self.at_ms = now_ms;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[derive(Debug)]
pub struct Limiter {
    per_client: f64,
    total: f64,
    clients: HashMap<Mac, Bucket>,
    all: Bucket,
    max_clients: usize,
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
        }
    }

    /// True when one more update to `client` may go now (the caller counts both outcomes).
    pub fn allow(&mut self, client: Mac, now_ms: u64) -> bool {
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
            return false;
        }
        let per = self.per_client;
        let bucket = self.clients.entry(client).or_insert(Bucket {
            tokens: per,
            at_ms: now_ms,
        });
        // The client's bucket is checked first so a suppressed client does not use the shared budget.
        bucket.take(now_ms, per, per) && self.all.take(now_ms, self.total, self.total)
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
