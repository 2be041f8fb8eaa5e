//! The best placement a set of demands allows: what the packing benchmarks and the simulator's
//! properties measure rlbd against.
//!
//! Goodput of a placement: each port delivers the sum of its clients' demands, at most its
//! capacity (a saturated port loses the excess however TCP shares it). The best placement
//! maximises that sum; among the best, the one with the lowest peak utilization (the one a
//! careful operator would pin by hand). Exact, by branch and bound over the clients largest
//! first, with two prunings: ports with the same capacity and load are interchangeable, and a
//! partial placement cannot beat the best one found when even the remaining demand, poured
//! into the remaining room, falls short. Meant for the small cases of tests and labs (a dozen
//! clients on a few ports), not for the daemon.

/// A placement and what it delivers.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// For each client (in the caller's order), its port.
    pub port_of: Vec<usize>,
    /// Goodput, in the unit of the demands.
    pub delivered: f64,
    /// Highest offered utilization (sum of demands / capacity) over the ports.
    pub peak: f64,
}

/// Goodput of `port_of`: per port, the sum of its clients' demands, at most its capacity.
pub fn delivered(caps: &[f64], demands: &[f64], port_of: &[usize]) -> f64 {
    let load = loads(caps.len(), demands, port_of);
    caps.iter().zip(&load).map(|(c, l)| l.min(*c)).sum()
}

/// Offered load (sum of demands) per port.
pub fn loads(ports: usize, demands: &[f64], port_of: &[usize]) -> Vec<f64> {
    let mut load = vec![0.0; ports];
    for (d, &p) in demands.iter().zip(port_of) {
        if p < ports {
            load[p] += d.max(0.0);
        }
    }
    load
}

/// The best placement of `demands` on ports of capacities `caps` (all positive). With no port,
/// every client is placed on port 0 and nothing is delivered.
pub fn best(caps: &[f64], demands: &[f64]) -> Placement {
    search(caps, demands, true)
}

/// What the best placement delivers, without the tie-break on the peak (much faster when every
/// demand fits: the first placement that delivers all of it ends the search).
pub fn best_delivered(caps: &[f64], demands: &[f64]) -> f64 {
    search(caps, demands, false).delivered
}

fn search(caps: &[f64], demands: &[f64], tie_break: bool) -> Placement {
    let n = demands.len();
    if caps.is_empty() {
        return Placement {
            port_of: vec![0; n],
            delivered: 0.0,
            peak: f64::INFINITY,
        };
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| demands[b].total_cmp(&demands[a]).then(a.cmp(&b)));
    let d: Vec<f64> = order.iter().map(|&i| demands[i].max(0.0)).collect();
    let mut suffix = vec![0.0; n + 1];
    for i in (0..n).rev() {
        suffix[i] = suffix[i + 1] + d[i];
    }
    let mut s = Search {
        caps,
        d: &d,
        suffix: &suffix,
        load: vec![0.0; caps.len()],
        assign: vec![0; n],
        best_value: -1.0,
        best_peak: f64::INFINITY,
        best_assign: vec![0; n],
        ceiling: caps.iter().sum::<f64>().min(suffix[0]),
        tie_break,
    };
    // A first answer to beat: largest first, each to the least utilized port.
    let mut greedy = vec![0; n];
    for (k, &x) in d.iter().enumerate() {
        let p = (0..caps.len())
            .min_by(|&a, &b| ((s.load[a] + x) / caps[a]).total_cmp(&((s.load[b] + x) / caps[b])))
            .unwrap_or(0);
        s.load[p] += x;
        greedy[k] = p;
    }
    s.best_value = s.value();
    s.best_peak = s.peak();
    s.best_assign = greedy;
    s.load.iter_mut().for_each(|l| *l = 0.0);
    s.go(0);
    let mut port_of = vec![0; n];
    for (k, &i) in order.iter().enumerate() {
        port_of[i] = s.best_assign[k];
    }
    Placement {
        delivered: delivered(caps, demands, &port_of),
        peak: peak(caps, demands, &port_of),
        port_of,
    }
}

/// Highest offered utilization of a placement.
pub fn peak(caps: &[f64], demands: &[f64], port_of: &[usize]) -> f64 {
    loads(caps.len(), demands, port_of)
        .iter()
        .zip(caps)
        .map(|(l, c)| l / c)
        .fold(0.0, f64::max)
}

/// Relative tolerance under which two goodputs count as equal.
const EPS: f64 = 1e-9;

struct Search<'a> {
    caps: &'a [f64],
    d: &'a [f64],
    suffix: &'a [f64],
    load: Vec<f64>,
    assign: Vec<usize>,
    best_value: f64,
    best_peak: f64,
    best_assign: Vec<usize>,
    /// No placement delivers more than this: every demand, or every port full.
    ceiling: f64,
    /// Among the placements that deliver the most, look for the lowest peak.
    tie_break: bool,
}

impl Search<'_> {
    fn value(&self) -> f64 {
        self.caps
            .iter()
            .zip(&self.load)
            .map(|(c, l)| l.min(*c))
            .sum()
    }

    fn peak(&self) -> f64 {
        self.caps
            .iter()
            .zip(&self.load)
            .map(|(c, l)| l / c)
            .fold(0.0, f64::max)
    }

    fn go(&mut self, k: usize) {
        let tol = EPS * self.ceiling.max(1.0);
        let value = self.value();
        if k == self.d.len() {
            let peak = self.peak();
            if value > self.best_value + tol
                || (value > self.best_value - tol && peak < self.best_peak)
            {
                self.best_value = value;
                self.best_peak = peak;
                self.best_assign.clone_from(&self.assign);
            }
            return;
        }
        // What is lost to overflow stays lost; the rest can at best fill every room.
        let room: f64 = self
            .caps
            .iter()
            .zip(&self.load)
            .map(|(c, l)| (c - l).max(0.0))
            .sum();
        let bound = value + self.suffix[k].min(room);
        if bound < self.best_value - tol {
            return;
        }
        // The peak only grows as clients are added, and at best the rest spreads evenly: a
        // partial placement that cannot get under the best complete one's peak cannot win the
        // tie-break.
        if bound < self.best_value + tol && !self.tie_break {
            return;
        }
        if bound < self.best_value + tol {
            let cap_sum: f64 = self.caps.iter().sum();
            let spread = (self.load.iter().sum::<f64>() + self.suffix[k]) / cap_sum;
            if self.peak().max(spread) >= self.best_peak {
                return;
            }
        }
        for p in 0..self.caps.len() {
            let same_as_earlier =
                (0..p).any(|q| self.caps[q] == self.caps[p] && self.load[q] == self.load[p]);
            if same_as_earlier {
                continue;
            }
            self.load[p] += self.d[k];
            self.assign[k] = p;
            self.go(k + 1);
            self.load[p] -= self.d[k];
            // Reached the ceiling (with the lowest peak there can be, if that counts): done.
            if self.best_value >= self.ceiling - tol
                && (!self.tie_break || self.best_peak <= self.lowest_peak())
            {
                return;
            }
        }
    }

    /// No placement has a lower peak than all demand spread perfectly evenly.
    fn lowest_peak(&self) -> f64 {
        let total: f64 = self.suffix[0];
        let largest = self.d.first().copied().unwrap_or(0.0);
        let cap_sum: f64 = self.caps.iter().sum();
        let cap_max = self.caps.iter().copied().fold(0.0, f64::max);
        (total / cap_sum).max(largest / cap_max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every placement, tried one by one: the reference for the search.
    fn exhaustive(caps: &[f64], demands: &[f64]) -> (f64, f64) {
        let (p, n) = (caps.len(), demands.len());
        let mut best = (-1.0, f64::INFINITY);
        let mut assign = vec![0usize; n];
        loop {
            let v = delivered(caps, demands, &assign);
            let pk = peak(caps, demands, &assign);
            if v > best.0 + 1e-9 || (v > best.0 - 1e-9 && pk < best.1) {
                best = (v, pk);
            }
            let mut i = 0;
            while i < n {
                assign[i] += 1;
                if assign[i] < p {
                    break;
                }
                assign[i] = 0;
                i += 1;
            }
            if i == n {
                return best;
            }
        }
    }

    #[test]
    fn matches_exhaustive_search_on_small_cases() {
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..200 {
            let ports = 2 + (next() % 3) as usize;
            let n = 1 + (next() % 7) as usize;
            let caps: Vec<f64> = (0..ports)
                .map(|_| [10.0, 20.0, 20.0][(next() % 3) as usize])
                .collect();
            let demands: Vec<f64> = (0..n).map(|_| (next() % 150) as f64 / 10.0).collect();
            let got = best(&caps, &demands);
            let want = exhaustive(&caps, &demands);
            assert!((best_delivered(&caps, &demands) - want.0).abs() < 1e-6);
            assert!(
                (got.delivered - want.0).abs() < 1e-6 && (got.peak - want.1).abs() < 1e-9,
                "caps {caps:?} demands {demands:?}: got {got:?}, want {want:?}"
            );
        }
    }

    #[test]
    fn perfect_packing_is_found() {
        // 12 + 8 and 11 + 9 fill two ports of 20 exactly; any other split overflows one.
        let p = best(&[20.0, 20.0], &[12.0, 11.0, 9.0, 8.0]);
        assert_eq!(p.delivered, 40.0);
        assert_eq!(p.peak, 1.0);
        assert_eq!(p.port_of[0], p.port_of[3]);
        assert_eq!(p.port_of[1], p.port_of[2]);
    }

    #[test]
    fn overflow_is_counted_at_capacity() {
        let p = best(&[10.0], &[8.0, 7.0]);
        assert_eq!(p.delivered, 10.0);
        assert_eq!(delivered(&[10.0, 10.0], &[8.0, 7.0], &[0, 0]), 10.0);
        assert_eq!(delivered(&[10.0, 10.0], &[8.0, 7.0], &[0, 1]), 15.0);
    }

    #[test]
    fn a_dozen_clients_on_four_ports_is_quick() {
        let demands = [9.1, 8.7, 8.2, 7.5, 7.1, 6.6, 6.0, 5.2, 4.9, 4.1, 3.3, 2.9];
        let t = std::time::Instant::now();
        let p = best(&[20.0; 4], &demands);
        assert!(p.delivered > 73.0, "{p:?}");
        assert!(t.elapsed().as_secs_f64() < 5.0);
    }
}
