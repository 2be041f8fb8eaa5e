//! `rlbd simulate`: replays a scenario through the daemon's own engine, one tick a second: the
//! engine decides (detector, hold-down, learned ceiling, planner, confirm-before-send, limits)
//! as the daemon does, on the LAN model the simulated month runs (`lan`): the scenario's slaves
//! are its ports (plain, or with `bond` the slaves of a balance-alb bond whose driver answers
//! ARP, deals clients anew when a slave fails or returns and moves the bond's MAC), its clients
//! have Linux-like neighbour caches for the server's address, and the server kernel keeps its
//! table; a bond's `guests` sit behind a bridge over it, where a learning switch sends their
//! frames. The engine's update frames go on the wire; a client moves when its cache takes one.
//!
//! The traffic model: each up slave delivers at most its capacity, shared among the clients
//! sending to it; a down slave delivers nothing; a client sends where its cache says, and the
//! second's traffic follows the caches as they stand after the second's link events (a
//! failover lands in the second its carrier fell, a move decided at a second's evaluation on
//! the next). Demands are elastic: a client sends its demand when its slave has room, and on a
//! saturated slave it gets a share of the capacity, max-min fair (water filling), or, with
//! `elastic.unfairness` > 1, weighted max-min with a weight drawn afresh each time the client
//! lands on a slave, as TCP flows that ramped up in a different order end up with different
//! shares. With
//! `elastic.move_lag`, a move takes effect that fraction of a second late, as the daemon's moves
//! do (it decides a little after the second's counters were read), so the first sample after a
//! move still shows part of the old placement.

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;

use crate::policy;

mod counting;
pub mod generate;
pub mod ideal;
pub mod lan;
mod scenario;
mod shell;
mod traffic;

pub use counting::SamplingSpec;
pub use scenario::{
    parse, ClientSpec, Elastic, Event, GuestSpec, RandomDemands, Scenario, SlaveSpec, Tick,
};

pub use traffic::{fair_share, run, run_logged, weighted_share};

#[derive(Debug, Serialize)]
pub struct SlaveOut {
    pub rx_mbps: f64,
    pub util: f64,
    pub overloaded: bool,
    /// The port's sampling ratio, when it is sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub one_in: Option<u32>,
}

#[derive(Debug, Serialize)]
pub struct MoveOut {
    pub client: String,
    pub from: String,
    pub to: String,
    pub rate_mbps: f64,
    pub reason: policy::Reason,
}

#[derive(Debug, Serialize)]
pub struct TickOut {
    pub t: u64,
    pub slaves: BTreeMap<String, SlaveOut>,
    pub moves: Vec<MoveOut>,
    pub delivered_mbps: f64,
    /// What the clients wanted this tick, Mbit/s.
    pub demand_mbps: f64,
    /// Each client's slave index this tick (before this tick's moves), and its demand: for the
    /// in-process checks, not printed.
    #[serde(skip)]
    pub placement: Vec<usize>,
    #[serde(skip)]
    pub demands: Vec<f64>,
}

/// The subcommand: read FILE (or `-`), print JSON lines; with `log`, the engine's records at
/// that level and above on standard error.
pub fn main(path: &std::path::Path, log: Option<log::LevelFilter>) -> Result<(), String> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).map_err(|e| format!("stdin: {e}"))?
    } else {
        std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?
    };
    let scenario = parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut err = None;
    let emit = |tick: &TickOut| {
        if err.is_none() {
            if let Err(e) = serde_json::to_writer(&mut out, tick)
                .map_err(std::io::Error::from)
                .and_then(|_| writeln!(out))
            {
                err = Some(e);
            }
        }
    };
    // Standard error is for the operator: a write it refuses is not worth failing the run.
    let say = |line: &str| drop(writeln!(std::io::stderr(), "{line}"));
    run_logged(&scenario, log.unwrap_or(log::LevelFilter::Off), emit, say);
    out.flush().map_err(|e| format!("stdout: {e}"))?;
    err.map_or(Ok(()), |e| Err(format!("stdout: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fair_share_is_max_min() {
        assert_eq!(fair_share(1000.0, &[900.0, 900.0]), vec![500.0, 500.0]);
        assert_eq!(fair_share(1000.0, &[100.0, 900.0]), vec![100.0, 900.0]);
        assert_eq!(
            fair_share(1000.0, &[100.0, 950.0, 950.0]),
            vec![100.0, 450.0, 450.0]
        );
        assert!(fair_share(1000.0, &[]).is_empty());
    }

    /// Delivered Mbit/s per tick of a scenario: one client of 8 Mbit/s that shares a 10 Mbit/s
    /// slave with a 6 Mbit/s one until rlbd moves it to an empty slave.
    fn two_on_one(growth: f64) -> Vec<f64> {
        let text = format!(
            r#"{{"slaves":[{{"name":"a","capacity_mbps":10}},{{"name":"b","capacity_mbps":10}}],
                "clients":[{{"ip":"10.0.0.1","slave":"a"}},{{"ip":"10.0.0.2","slave":"a"}}],
                "ticks":[{{"demand_mbps":{{"10.0.0.1":8,"10.0.0.2":6}}}},{{}},{{}},{{}},{{}},{{}},{{}},{{}},{{}},{{}},{{}},{{}}],
                "elastic":{{"seed":7,"growth":{growth}}}}}"#
        );
        let s = parse(&text).unwrap();
        let mut out = Vec::new();
        run(&s, |t| out.push(t.delivered_mbps));
        out
    }

    #[test]
    fn with_growth_a_moved_flow_grows_into_its_room_over_seconds() {
        let at_once = two_on_one(1.0);
        let ramped = two_on_one(0.0);
        // Both end delivering the full 14 Mbit/s; at once the second after the move lands, with
        // slow growth only after a few seconds, and never more than at once.
        assert_eq!(*at_once.last().unwrap(), 14.0);
        assert!((ramped.last().unwrap() - 14.0).abs() < 0.1, "{ramped:?}");
        let first_full = |v: &[f64]| v.iter().position(|&x| x > 13.9).unwrap();
        assert!(
            first_full(&ramped) > first_full(&at_once),
            "{at_once:?} {ramped:?}"
        );
        assert!(at_once.iter().zip(&ramped).all(|(a, r)| r <= &(a + 1e-9)));
    }

    #[test]
    fn weighted_share_gives_by_weight_and_never_more_than_asked() {
        assert_eq!(
            weighted_share(30.0, &[100.0, 100.0], &[1.0, 2.0]),
            vec![10.0, 20.0]
        );
        // The small client is satisfied; the rest is split 1:2.
        assert_eq!(
            weighted_share(30.0, &[6.0, 100.0, 100.0], &[3.0, 1.0, 2.0]),
            vec![6.0, 8.0, 16.0]
        );
        assert_eq!(
            weighted_share(30.0, &[5.0, 6.0], &[1.0, 3.0]),
            vec![5.0, 6.0]
        );
    }
}
