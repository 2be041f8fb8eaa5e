//! Overload detection per port: K hits over threshold within the last W one-second samples.

/// One one-second sample as the detector sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sample {
    Hit,
    Miss,
    /// No usable reading: port just added, counter reset or wrapped, link down. It counts as
    /// no hit, so one bad reading can neither make nor, alone, unmake an overload of K of W.
    Missing,
}

#[derive(Debug, Clone)]
pub struct Detector {
    samples: Vec<Sample>,
    next: usize,
    filled: usize,
    hits: usize,
}

impl Detector {
    pub fn new(window: usize, hits: usize) -> Self {
        let window = window.max(1);
        Self {
            samples: vec![Sample::Missing; window],
            next: 0,
            filled: 0,
            hits: hits.max(1),
        }
    }

    /// Records this second's utilization (`None` when there is no usable reading).
    pub fn push(&mut self, utilization: Option<f64>, threshold: f64) -> Sample {
        let s = match utilization {
            Some(u) if u.is_finite() && u > threshold => Sample::Hit,
            Some(u) if u.is_finite() => Sample::Miss,
            _ => Sample::Missing,
        };
        self.samples[self.next] = s;
        self.next = (self.next + 1) % self.samples.len();
        self.filled = (self.filled + 1).min(self.samples.len());
        s
    }

    pub fn hit_count(&self) -> usize {
        self.samples.iter().filter(|s| **s == Sample::Hit).count()
    }

    pub fn overloaded(&self) -> bool {
        self.hit_count() >= self.hits
    }

    /// Forgets the window, e.g. after the port went down or its capacity changed.
    pub fn reset(&mut self) {
        self.samples.fill(Sample::Missing);
        self.filled = 0;
    }

    /// Oldest first: `x` hit, `.` miss, `?` missing, `_` not yet sampled.
    pub fn window_string(&self) -> String {
        let n = self.samples.len();
        (0..n)
            .map(|i| {
                let idx = (self.next + i) % n;
                if i < n - self.filled {
                    '_'
                } else {
                    match self.samples[idx] {
                        Sample::Hit => 'x',
                        Sample::Miss => '.',
                        Sample::Missing => '?',
                    }
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(d: &mut Detector, utils: &[Option<f64>]) {
        for u in utils {
            d.push(*u, 0.8);
        }
    }

    #[test]
    fn two_of_three_over_threshold_is_overload() {
        let mut d = Detector::new(3, 2);
        feed(&mut d, &[Some(0.9)]);
        assert!(!d.overloaded());
        feed(&mut d, &[Some(0.1), Some(0.95)]);
        assert!(d.overloaded());
        assert_eq!(d.window_string(), "x.x");
    }

    #[test]
    fn one_zero_reading_under_interrupt_load_does_not_clear_overload() {
        let mut d = Detector::new(3, 2);
        feed(&mut d, &[Some(0.9), Some(0.0), Some(0.9)]);
        assert!(d.overloaded());
    }

    #[test]
    fn exactly_at_threshold_is_not_a_hit() {
        let mut d = Detector::new(3, 2);
        feed(&mut d, &[Some(0.8), Some(0.8), Some(0.8)]);
        assert!(!d.overloaded());
    }

    #[test]
    fn missing_samples_are_not_hits() {
        let mut d = Detector::new(3, 2);
        feed(&mut d, &[Some(0.9), None, None]);
        assert!(!d.overloaded());
        assert_eq!(d.window_string(), "x??");
        feed(&mut d, &[Some(f64::NAN), Some(f64::INFINITY)]);
        assert!(!d.overloaded());
    }

    #[test]
    fn old_hits_slide_out_of_the_window() {
        let mut d = Detector::new(3, 2);
        feed(&mut d, &[Some(0.9), Some(0.9), Some(0.1), Some(0.1)]);
        assert!(!d.overloaded());
    }

    #[test]
    fn reset_forgets_everything() {
        let mut d = Detector::new(3, 2);
        feed(&mut d, &[Some(0.9), Some(0.9)]);
        d.reset();
        assert!(!d.overloaded());
        assert_eq!(d.window_string(), "___");
    }
}
