//! Anti-flapping with settling, under any demand sequence: the planner driven second by second
//! with the bookkeeping the daemon and the simulator keep (when each client moved, from where,
//! why), every port up, the readings any that fit the ports (a saturated port shares its
//! capacity in proportion to demand). No client moves more than twice within a hold-down, and
//! none goes back within its hold-down to the port it left.

use proptest::prelude::*;

use super::*;
use crate::policy::plan;

const CAP: f64 = 100e6;

struct Run {
    on: Vec<PortIndex>,
    /// (second, from, to, reason) of each client's moves.
    moves: Vec<Vec<(u64, PortIndex, PortIndex, Reason)>>,
}

fn views(
    cfg: &PolicyConfig,
    run: &Run,
    t: u64,
    demand: &[f64],
    ports: usize,
) -> (Vec<PortView>, Vec<ClientView>) {
    let mut load = vec![0.0; ports];
    for (c, &p) in run.on.iter().enumerate() {
        load[p] += demand[c];
    }
    let scale = |p: PortIndex| if load[p] > CAP { CAP / load[p] } else { 1.0 };
    let pv = (0..ports)
        .map(|p| PortView {
            capacity_bps: CAP,
            up: true,
            rx_bps: load[p].min(CAP),
            overloaded: load[p] > cfg.threshold * CAP,
            resolution_bps: 0.0,
        })
        .collect();
    let cv = (0..run.on.len())
        .map(|c| {
            let last = run.moves[c].last();
            let held = last.is_some_and(|m| t - m.0 < cfg.hold_down);
            ClientView {
                port: run.on[c],
                rate_bps: demand[c] * scale(run.on[c]),
                held,
                fixed: false,
                since_move: last.map(|m| t - m.0),
                last_move: last.filter(|_| held).map(|m| (m.1, m.3)),
            }
        })
        .collect();
    (pv, cv)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn no_client_moves_more_than_twice_per_hold_down_nor_back_within_it(
        ports in 2usize..=4,
        hold_down in 2u64..12,
        settle in 0u64..8,
        // Per second, each client's demand in Mbit/s; a row per second.
        seconds in prop::collection::vec(prop::collection::vec(0.0f64..70.0, 6), 5..40),
    ) {
        let cfg = PolicyConfig { hold_down, settle, ..PolicyConfig::default() };
        let n = seconds[0].len();
        let mut run = Run { on: vec![0; n], moves: vec![Vec::new(); n] };
        for (t, row) in seconds.iter().enumerate() {
            let t = t as u64;
            let demand: Vec<f64> = row.iter().map(|d| d * 1e6).collect();
            let (pv, cv) = views(&cfg, &run, t, &demand, ports);
            for m in plan(&cfg, &pv, &cv) {
                prop_assert_eq!(m.from, run.on[m.client]);
                run.on[m.client] = m.to;
                run.moves[m.client].push((t, m.from, m.to, m.reason));
            }
        }
        for (c, ms) in run.moves.iter().enumerate() {
            for w in ms.windows(2) {
                let ((t1, from, ..), (t2, _, to, _)) = (w[0], w[1]);
                prop_assert!(t2 - t1 >= hold_down || to != from,
                    "client {c} back on {to} at {t2}, left at {t1}: {ms:?}");
            }
            for w in ms.windows(3) {
                prop_assert!(w[2].0 - w[0].0 >= hold_down,
                    "client {c} moved thrice within {hold_down} s: {ms:?}");
            }
        }
    }
}
