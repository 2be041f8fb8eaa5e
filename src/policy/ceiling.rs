//! Where a saturated port reads, learned from the ports themselves (issue 27).
//!
//! A port that carries all it can does not read 100% of its capacity: framing the counter does
//! not see, a shaper's own overhead, the driver's. The namespace lab's ports read about 97%,
//! a NIC taking 1500-byte frames at line rate about 98%. `saturated` (94%) and `max_fill` (93%)
//! are set under the lowest of those, so on a port that reads 97-98% when full they leave room
//! unused that a nearly full bond needs. rlbd learns the ceiling from the busiest port's
//! readings at or over `saturated` (the lowest of late, as what a full port reads varies with
//! its flows) and raises both toward it: a port is saturated from 2% under the ceiling, and a
//! move may fill its target up to 2.5% under it. Configured values are floors:
//! a ceiling is only learned where a port read at least `saturated`, and it never lowers them.
//! `docs/design.md` ("Where saturation reads") has the figures.

use super::config::PolicyConfig;
use super::model::PortView;

/// `saturated` sits this far under the learned ceiling: a full port's readings scatter from
/// second to second and must not drop out of it. 1% packed the study's bond a little better
/// (14 runs of 200 under 97% at 95% load against 17-18) but made the `many` scenario busier.
pub const SATURATED_UNDER: f64 = 0.02;
/// `max_fill` sits this far under it, under `saturated`: a target filled this far is not taken
/// for saturated.
pub const FILL_UNDER: f64 = 0.025;
/// Rise toward a higher reading (two seconds running) by an eighth of the way; a lower one is
/// taken at once. What a full port reads depends on its flows (in the packing lab 98% with
/// eleven TCP flows on one port, 95-96% with four), and `saturated` must stay under the lowest
/// of it: a full port reading under `saturated` is relieved by the paper's rule, which fills no
/// target past the threshold, and the lab saw one sit for 7 s with three ports at 55-75% when
/// the level was the highest reading, not the lowest.
const RISE: f64 = 0.125;

/// The learned ceiling, as a utilization; none until a port has read `saturated` or more two
/// seconds running.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ceiling {
    level: Option<f64>,
    /// The last second's busiest reading at or over `saturated`, if it had one.
    last: Option<f64>,
}

impl Ceiling {
    /// Takes this second's ports: the busiest live one, if it reads at least `saturated` (and
    /// not over its capacity, a reading that says the capacity is wrong, not where it tops out),
    /// and this second and the last read so much.
    pub fn observe(&mut self, cfg: &PolicyConfig, ports: &[PortView]) {
        let top = ports
            .iter()
            .filter(|p| p.up && p.capacity_bps > 0.0 && p.capacity_bps.is_finite())
            .map(PortView::utilization)
            .filter(|u| u.is_finite() && *u >= cfg.saturated && *u <= 1.0)
            .fold(None, |m: Option<f64>, u| Some(m.map_or(u, |m| m.max(u))));
        let last = std::mem::replace(&mut self.last, top);
        let Some(now) = top else {
            return;
        };
        self.level = match (self.level, last) {
            // Lower: at once, one second is enough.
            (Some(l), _) if now < l => Some(now),
            // Higher, or the first: once the next second reads as much (a shaper's bucket or a
            // burst of TCP can lift one second a percent or two over where the port tops out).
            (None, Some(last)) => Some(now.min(last)),
            (Some(l), Some(last)) => Some(l + RISE * (now.min(last) - l).max(0.0)),
            (level, None) => level,
        };
    }

    /// The learned ceiling, if any.
    pub fn level(&self) -> Option<f64> {
        self.level
    }

    /// `cfg` with `saturated` and `max_fill` raised to just under the ceiling; never lowered.
    /// A `max_fill` at or under the threshold (the paper's rule alone, as configured) stays.
    pub fn tune(&self, cfg: &PolicyConfig) -> PolicyConfig {
        let mut tuned = cfg.clone();
        if let Some(l) = self.level {
            tuned.saturated = cfg.saturated.max(l - SATURATED_UNDER);
            if cfg.max_fill > cfg.threshold {
                tuned.max_fill = cfg.max_fill.max(l - FILL_UNDER);
            }
        }
        tuned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(util: f64) -> PortView {
        PortView {
            capacity_bps: 1e9,
            up: true,
            rx_bps: util * 1e9,
            overloaded: util > 0.8,
            resolution_bps: 0.0,
        }
    }

    fn learned(readings: &[&[f64]]) -> Ceiling {
        let cfg = PolicyConfig::default();
        let mut c = Ceiling::default();
        for second in readings {
            let ports: Vec<PortView> = second.iter().map(|&u| port(u)).collect();
            c.observe(&cfg, &ports);
        }
        c
    }

    #[test]
    fn nothing_is_learned_under_saturated_and_the_configured_values_stand() {
        let c = learned(&[&[0.93, 0.5], &[0.9, 0.92]]);
        assert_eq!(c.level(), None);
        assert_eq!(c.tune(&PolicyConfig::default()), PolicyConfig::default());
    }

    #[test]
    fn a_full_port_reading_97_percent_raises_saturated_to_95_and_max_fill_to_94_5() {
        let c = learned(&[&[0.97, 0.5, 0.6], &[0.97, 0.7, 0.6]]);
        let t = c.tune(&PolicyConfig::default());
        assert!((t.saturated - 0.95).abs() < 1e-9, "{t:?}");
        assert!((t.max_fill - 0.945).abs() < 1e-9, "{t:?}");
        assert!(t.validate().is_ok());
    }

    #[test]
    fn a_lower_full_reading_is_taken_at_once_and_a_higher_one_slowly() {
        let mut readings: Vec<&[f64]> = vec![&[0.98, 0.5]; 5];
        readings.extend(vec![&[0.955, 0.6][..]; 2]);
        assert!((learned(&readings).level().unwrap() - 0.955).abs() < 1e-9);
        readings.extend(vec![&[0.97, 0.6][..]; 3]);
        let l = learned(&readings).level().unwrap();
        assert!(l > 0.955 && l < 0.962, "{l}");
        readings.extend(vec![&[0.97, 0.6][..]; 30]);
        let l = learned(&readings).level().unwrap();
        assert!(l > 0.969, "{l}");
    }

    #[test]
    fn the_busiest_port_reading_saturated_or_more_always_counts_as_saturated() {
        // However high the level was, one second of a lower full reading brings `saturated` in
        // force to 2% under that reading at once: the port is relieved as a full one.
        for now in [0.945, 0.96, 0.975] {
            let last = [now, 0.5];
            let mut readings: Vec<&[f64]> = vec![&[0.99, 0.5]; 5];
            readings.push(&last);
            let t = learned(&readings).tune(&PolicyConfig::default());
            assert!(t.saturated <= now, "{now}: {t:?}");
            assert!((t.saturated - (now - SATURATED_UNDER).max(0.94)).abs() < 1e-9);
        }
    }

    #[test]
    fn one_second_over_where_the_port_tops_out_does_not_lift_it() {
        let mut readings: Vec<&[f64]> = vec![&[0.97, 0.5]; 5];
        readings.push(&[0.995, 0.5]);
        readings.extend(vec![&[0.97, 0.5][..]; 5]);
        assert!((learned(&readings).level().unwrap() - 0.97).abs() < 1e-9);
        // One second alone teaches nothing.
        assert_eq!(learned(&[&[0.97]]).level(), None);
    }

    #[test]
    fn the_papers_rule_alone_stays_when_configured() {
        let cfg = PolicyConfig {
            max_fill: 0.8,
            ..PolicyConfig::default()
        };
        let t = learned(&[&[0.97], &[0.97]]).tune(&cfg);
        assert_eq!(t.max_fill, 0.8);
        assert!(t.validate().is_ok());
    }

    #[test]
    fn it_never_lowers_what_is_configured_nor_learns_from_a_port_over_its_capacity() {
        let c = learned(&[&[1.3, 0.5], &[0.95, 0.2], &[0.95, 0.2]]);
        assert_eq!(c.level(), Some(0.95));
        let t = c.tune(&PolicyConfig::default());
        assert_eq!(t.saturated, PolicyConfig::default().saturated);
        assert_eq!(t.max_fill, PolicyConfig::default().max_fill);
        assert!(learned(&[&[f64::NAN], &[1.3]]).level().is_none());
    }
}
