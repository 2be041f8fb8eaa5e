//! Packing a nearly full bond in the simulator (issue 15), modelled on the namespace lab: four
//! slaves of 20 Mbit/s that deliver 97% of that when saturated, ten to twelve elastic clients
//! with seeded random demands, all starting on one slave, TCP-unfair shares on a saturated slave
//! (log-uniform weights up to 30: some flows nearly starve, as in the lab), flows that take
//! seconds to grow into room they are given (`elastic.growth` 0.6: what the lab's starved TCP
//! flows do, read from the daemon's status twice a second during the packing bench), and moves that
//! take effect a fifth of a second late, as the daemon's do.
//!
//! Properties: no client moves again within the hold-down but for one settling correction
//! (issue 27), never back within it to the slave it left, nor back and forth; while rlbd packs
//! the bond (the first hold-down) no move raises the peak of what the slaves deliver once every
//! flow has grown into the placement; and, on fixed seeds, the goodput from 10 s after the
//! traffic started is within 97% of the best placement the demands allow (computed exactly,
//! `simulate::ideal`) in all but a few runs, none under 93% (random seeds check only the
//! invariants).
//!
//! `cargo test --release --test simulate_packing -- --ignored --nocapture study` prints the
//! figures over 200 seeds per load level (a study, not a check). `RLBD_STUDY_UNFAIR`,
//! `RLBD_STUDY_GROWTH`, `RLBD_STUDY_EFFICIENCY` and `RLBD_STUDY_CONFIG` vary the model and the
//! knobs;
//! `RLBD_STUDY_LOADS=0.92,0.95` and `RLBD_STUDY_SEEDS=0,1,2` pick the runs;
//! `RLBD_STUDY_UNDER` lists the runs under 97% with their final placement, `RLBD_STUDY_TRACE`
//! prints each second with moves, `RLBD_STUDY_WORST` the worst run's log,
//! `RLBD_STUDY_FAULTS` the invariant faults and `RLBD_STUDY_REACH` (with `RLBD_STUDY_UNDER`)
//! whether moves the rules allow could mend each run under 97% at 12 and 20 s, knowing every
//! demand (`packing_reach`).

mod packing_reach;

use proptest::prelude::*;
use rlbd::policy::Reason;
use rlbd::simulate::{ideal, parse, run, TickOut};

const START: u64 = 1;
const TICKS: usize = 40;

/// t, delivered, placement, demands, moves made.
type Tick = (u64, f64, Vec<usize>, Vec<f64>, usize);

struct Outcome {
    /// What the placement rlbd made within the first hold-down delivers once every flow has
    /// grown into it, over the best placement's.
    placed_share: f64,
    /// Mean goodput from 10 s after the traffic started to the end, over the best placement's.
    share: f64,
    /// Seconds after the traffic started until goodput reached 95% of the best for good.
    time_to_95: Option<u64>,
    moves: usize,
    /// Problems found: a peak that rose, a client moved within the hold-down other than by one
    /// settling correction, a client back on a slave it left.
    faults: Vec<String>,
    log: String,
    /// With `RLBD_STUDY_REACH`: what could mend the run at 12 and 20 s (`packing_reach`).
    reach: String,
}

/// The namespace lab's ports read about 97% of their cap when saturated.
const EFFICIENCY: f64 = 0.97;
/// What the lab's TCP clients send, as a share of their tbf cap: the simulator's demands are
/// what clients send, so the lab's load levels (sums of caps) are scaled by this.
const SENT: f64 = 0.957;
/// How unfair TCP's shares are on a saturated port (largest weight; the smallest is 1).
const UNFAIRNESS: f64 = 30.0;

fn scenario(seed: u64, load: f64, clients: usize, caps: &[f64], unfairness: f64) -> String {
    scenario_with(seed, load, clients, caps, unfairness, 0.6)
}

fn scenario_with(
    seed: u64,
    load: f64,
    clients: usize,
    caps: &[f64],
    unfairness: f64,
    max_share: f64,
) -> String {
    let slaves: Vec<String> = caps
        .iter()
        .enumerate()
        .map(|(i, c)| format!(r#"{{"name":"p{i}","capacity_mbps":{c}}}"#))
        .collect();
    format!(
        r#"{{"slaves":[{}],
            "random_demands":{{"seed":{seed},"load":{load},"clients":{clients},"slave":"p0","ticks":{TICKS},"start":{START},"max_share":{max_share}}},
            "elastic":{{"seed":{seed},"unfairness":{unfairness},"move_lag":0.2,"efficiency":{},"growth":{}}}{}}}"#,
        slaves.join(","),
        efficiency(),
        growth(),
        study_config()
    )
}

/// What a full slave delivers (`EFFICIENCY`); `RLBD_STUDY_EFFICIENCY` overrides, to see how
/// packing fares where full ports read higher or lower (issue 27: `saturated` and `max_fill`
/// follow what full ports read).
fn efficiency() -> f64 {
    env_f64("RLBD_STUDY_EFFICIENCY", EFFICIENCY)
}

/// How fast flows take up room (see `Elastic::growth`); `RLBD_STUDY_GROWTH` overrides.
fn growth() -> f64 {
    env_f64("RLBD_STUDY_GROWTH", GROWTH)
}

/// The lab's moved flows draw 90% of their demand within 1 s in about half the moves, within
/// 2 s in nine of ten.
const GROWTH: f64 = 0.6;

/// For studies of the knobs: `RLBD_STUDY_CONFIG='"max_fill":0.9'` adds to the scenario's config.
fn study_config() -> String {
    match std::env::var("RLBD_STUDY_CONFIG") {
        Ok(v) if !v.is_empty() => format!(r#","config":{{{v}}}"#),
        _ => String::new(),
    }
}

/// A move as the run logs it: (second, client, from, to, reason).
type Moved = (u64, String, String, String, Reason);

fn evaluate(json: &str) -> Outcome {
    let s = parse(json).unwrap();
    // What the slaves can deliver: the best placement is judged by the same measure.
    let caps: Vec<f64> = s
        .slaves
        .iter()
        .map(|sl| sl.capacity_mbps * s.elastic.efficiency)
        .collect();
    let (ticks, moves_log) = record(&s, caps.len());
    let demands = ticks.last().unwrap().3.clone();
    let best_delivered = ideal::best_delivered(&caps, &demands);
    let judged: Vec<f64> = ticks
        .iter()
        .filter(|t| t.0 >= START + 10)
        .map(|t| t.1)
        .collect();
    let share = judged.iter().sum::<f64>() / judged.len() as f64 / best_delivered;
    let last_low = ticks[START as usize..]
        .iter()
        .rposition(|t| t.1 < 0.95 * best_delivered - 1e-9);
    let time_to_95 = match last_low {
        None => Some(0),
        Some(i) if START as usize + i + 1 < ticks.len() => Some(i as u64 + 1),
        Some(_) => None,
    };
    let mut faults = peak_faults(&s, &caps, &ticks);
    faults.extend(oscillations(&moves_log, s.config.hold_down));
    let fin = &ticks.last().unwrap().2;
    let over: Vec<String> = ideal::loads(caps.len(), &demands, fin)
        .iter()
        .zip(&caps)
        .map(|(l, c)| format!("{:+.1}", l - c))
        .collect();
    let log = format!(
        "demands {:?}\nbest delivers {:.1}\nmoves {:?}\nfinal {:?} load-cap {over:?}\ndelivered {:?}",
        demands,
        best_delivered,
        moves_log,
        ticks.last().unwrap().2,
        ticks.iter().map(|t| t.1).collect::<Vec<_>>()
    );
    let reach = if std::env::var("RLBD_STUDY_REACH").is_ok() {
        reach(&caps, &ticks, s.config.hold_down)
    } else {
        String::new()
    };
    let at31 = &ticks[31.min(ticks.len() - 1)].2;
    let placed_share = ideal::delivered(&caps, &demands, at31) / best_delivered;
    Outcome {
        placed_share,
        share,
        time_to_95,
        moves: moves_log.len(),
        faults,
        log,
        reach,
    }
}

/// At 12 and 20 s: the fewest moves (up to four) the rules allow that would leave every slave
/// under what it delivers, knowing every demand, or that there are none.
fn reach(caps: &[f64], ticks: &[Tick], hold: u64) -> String {
    const MOST: usize = 4;
    let placements: Vec<(u64, Vec<usize>)> = ticks.iter().map(|t| (t.0, t.2.clone())).collect();
    let at = |t: u64| {
        let demands = &ticks
            .iter()
            .find(|w| w.0 == t)
            .map_or(&ticks[0].3, |w| &w.3);
        match packing_reach::mend(caps, demands, &placements, t, hold, MOST) {
            Some(steps) if steps.is_empty() => format!("{t} s: none needed"),
            Some(steps) if steps.len() == 1 => format!("{t} s: 1 move {steps:?}"),
            Some(steps) => format!("{t} s: {} moves {steps:?}", steps.len()),
            None => format!("{t} s: none within {MOST} moves"),
        }
    };
    format!("{}; {}", at(START + 11), at(START + 19))
}

/// Runs the scenario, keeping each second's figures and every move (`RLBD_STUDY_TRACE` prints
/// the seconds with moves, and the first ones).
fn record(s: &rlbd::simulate::Scenario, ports: usize) -> (Vec<Tick>, Vec<Moved>) {
    let mut ticks: Vec<Tick> = Vec::new();
    let mut moves_log = Vec::new();
    let trace = std::env::var("RLBD_STUDY_TRACE").is_ok();
    run(s, |t: &TickOut| {
        if trace && (!t.moves.is_empty() || t.t < 14) {
            let mut per = vec![Vec::new(); ports];
            for (c, &p) in t.placement.iter().enumerate() {
                per[p].push(format!("{c}:{:.1}", t.demands[c]));
            }
            let mv: Vec<String> = t
                .moves
                .iter()
                .map(|m| {
                    format!(
                        "{}({:.1})->{}",
                        m.client.rsplit('.').next().unwrap(),
                        m.rate_mbps,
                        m.to
                    )
                })
                .collect();
            println!(
                "t={} del {:.1} {:?} moves {:?}",
                t.t, t.delivered_mbps, per, mv
            );
        }
        for m in &t.moves {
            moves_log.push((
                t.t,
                m.client.clone(),
                m.from.clone(),
                m.to.clone(),
                m.reason,
            ));
        }
        ticks.push((
            t.t,
            t.delivered_mbps,
            t.placement.clone(),
            t.demands.clone(),
            t.moves.len(),
        ));
    });
    (ticks, moves_log)
}

/// The peak, while rlbd packs the bond (the first hold-down; after it, a slave that a client
/// left a moment ago reads low while its flows grow back, and may be filled): what each slave
/// delivers once every flow has grown into the placement (the demands it is asked to carry, at
/// most what it can deliver), over its capacity, before a round of moves and after it. A
/// one-second reading cannot be held to it: flows that were starved take seconds to grow into
/// room (`elastic.growth`), so a slave can read higher two seconds after a move only because its
/// own flows recovered. Nor can the demands: a client's demand on a saturated slave is not known
/// until it moved.
fn peak_faults(s: &rlbd::simulate::Scenario, caps: &[f64], ticks: &[Tick]) -> Vec<String> {
    let steady_peak = |on: &[usize], d: &[f64]| -> f64 {
        ideal::loads(caps.len(), d, on)
            .iter()
            .zip(caps)
            .zip(&s.slaves)
            .map(|((l, c), sl)| l.min(*c) / sl.capacity_mbps)
            .fold(0.0, f64::max)
    };
    let mut faults = Vec::new();
    for (i, w) in ticks.iter().enumerate() {
        if w.4 == 0 || i + 1 >= ticks.len() || w.0 > START + s.config.hold_down {
            continue;
        }
        let before = steady_peak(&w.2, &w.3);
        let after = steady_peak(&ticks[i + 1].2, &w.3);
        if after > before + 1e-6 {
            faults.push(format!(
                "t={}: the peak rose from {before:.3} to {after:.3}",
                w.0
            ));
        }
    }
    faults
}

/// Oscillation: a client moved again within the hold-down other than by one settling
/// correction (at most two moves per hold-down), sent back within it to the port it left, or
/// back and forth (after the hold-down, one move back may correct a slave rlbd overfilled; a
/// second is a swing).
fn oscillations(moves_log: &[Moved], hold: u64) -> Vec<String> {
    let mut faults = Vec::new();
    let mut last: std::collections::HashMap<&str, (u64, &str, Reason)> = Default::default();
    let mut returns: std::collections::HashMap<&str, usize> = Default::default();
    for (t, c, from, to, reason) in moves_log {
        if let Some((prev, left, prev_reason)) = last.get(c.as_str()) {
            let settles = *reason == Reason::Settle && *prev_reason != Reason::Settle;
            if t - prev < hold && !settles {
                faults.push(format!("{c} moved at {prev} and again at {t}"));
            }
            if t - prev < hold && left == to {
                faults.push(format!(
                    "{c} went back to {to} at {t}, within its hold-down"
                ));
            }
            if left == to {
                let n = returns.entry(c).or_default();
                *n += 1;
                if *n > 1 {
                    faults.push(format!("{c} went back to {to} a second time at {t}"));
                }
            }
        }
        last.insert(c, (*t, from, *reason));
    }
    faults
}

/// The lab's shape at a load level given as the lab gives it (sum of the clients' caps over the
/// bond's nominal capacity).
fn lab_like(seed: u64, lab_load: f64, clients: usize) -> Outcome {
    evaluate(&scenario(
        seed,
        lab_load * SENT,
        clients,
        &[20.0; 4],
        UNFAIRNESS,
    ))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn prop_no_oscillation_no_peak_rise(
        seed in 0u64..1_000_000,
        load in 0.70f64..0.95,
        clients in 10usize..=12,
        unfairness in 1.0f64..30.0,
    ) {
        let o = evaluate(&scenario(seed, load * SENT, clients, &[20.0; 4], unfairness));
        // Only the invariants: the share of the best is not one at 85-95% load (issue 15 is
        // open), and a random seed found a 92.6% run; the seeded tests below track it.
        prop_assert!(o.faults.is_empty(), "{:?}\n{}", o.faults, o.log);
    }

    #[test]
    fn prop_mixed_speeds_no_oscillation_no_peak_rise(
        seed in 0u64..1_000_000,
        load in 0.70f64..0.95,
        clients in 10usize..=12,
        unfairness in 1.0f64..30.0,
    ) {
        let caps = [30.0, 20.0, 20.0, 30.0];
        let o = evaluate(&scenario_with(seed, load * SENT, clients, &caps, unfairness, 0.75));
        // Only the invariants: the share of the best is not one at 85-95% load (issue 15 is
        // open), and a random seed found a 92.6% run; the seeded tests below track it.
        prop_assert!(o.faults.is_empty(), "{:?}\n{}", o.faults, o.log);
    }
}

/// Twenty seeds at each of the bench's load levels. The issue's goal is every run within 97% of
/// the best; what rlbd reaches is held here so that it cannot slip: every run up to 85% load,
/// all but one at 92% and three at 95% (where the last clients must go, their demands unseen,
/// into the last gaps, and each may move once per hold-down and be corrected once, issue 27),
/// none under 94%; 95% of the best within 10 s of the traffic starting in every run up to 92%,
/// in all but three at 95%.
#[test]
fn seeded_runs_per_load_level_against_the_best_placement() {
    const SEEDS: u64 = 20;
    for (load, allowed_under, allowed_slow) in
        [(0.70, 0, 0), (0.85, 0, 0), (0.92, 1, 0), (0.95, 3, 3)]
    {
        let mut under = Vec::new();
        let mut slow = 0;
        for seed in 0..SEEDS {
            let o = lab_like(seed, load, 11);
            assert!(
                o.faults.is_empty(),
                "load {load} seed {seed}: {:?}\n{}",
                o.faults,
                o.log
            );
            assert!(
                o.share >= 0.94,
                "load {load} seed {seed}: {:.3}\n{}",
                o.share,
                o.log
            );
            if o.share < 0.97 {
                under.push(format!("seed {seed}: {:.3}", o.share));
            }
            if o.time_to_95.is_none_or(|t| t > 10) {
                slow += 1;
            }
        }
        println!("load {load}: under 97%: {under:?}; 95% later than 10 s: {slow}/{SEEDS}");
        assert!(under.len() <= allowed_under, "load {load}: {under:?}");
        assert!(
            slow <= allowed_slow,
            "load {load}: {slow} runs took over 10 s to 95%"
        );
    }
}

/// A seed where a client was once moved twice in one round: one saturated port's walk moved
/// it, and another's gathering of room (a move between two ports with room) took it again from
/// the port the walk had just emptied below `max_fill`.
#[test]
fn no_client_moves_twice_in_a_round_when_room_is_gathered() {
    let o = lab_like(560, 0.92, 11);
    assert!(o.faults.is_empty(), "{:?}\n{}", o.faults, o.log);
}

/// Ticks of a long run: the hold-down (30 s) is long over by its last 30 s.
const LONG: usize = 130;

/// Goodput over the last 30 s of a `LONG` run, over the best placement's: where the packing
/// settles once every client may move again.
fn settled_share(seed: u64, lab_load: f64) -> f64 {
    let json = scenario(seed, lab_load * SENT, 11, &[20.0; 4], study_unfairness()).replace(
        &format!(r#""ticks":{TICKS}"#),
        &format!(r#""ticks":{LONG}"#),
    );
    let s = parse(&json).unwrap();
    let caps: Vec<f64> = s
        .slaves
        .iter()
        .map(|sl| sl.capacity_mbps * s.elastic.efficiency)
        .collect();
    let (mut delivered, mut demands) = (Vec::new(), Vec::new());
    run(&s, |t: &TickOut| {
        delivered.push(t.delivered_mbps);
        demands = t.demands.clone();
    });
    let last = &delivered[LONG - 30..];
    last.iter().sum::<f64>() / last.len() as f64 / ideal::best_delivered(&caps, &demands)
}

/// Runs that settled for good under 97% of the best before rlbd gathered room (a client moved
/// between two ports with room, so that a saturated port's client fits in one piece): each
/// left rooms of 2.5-5.8 Mbit/s on every port beside a saturated one whose clients draw more.
#[test]
fn runs_stuck_in_split_room_are_repacked_after_the_hold_down() {
    for (seed, load) in [(960, 0.85), (57, 0.92), (110, 0.92)] {
        let share = settled_share(seed, load);
        assert!(share >= 0.97, "load {load} seed {seed}: {share:.3}");
    }
}

/// Where runs settle once the hold-down is over (`RLBD_STUDY_LOADS`, `RLBD_STUDY_SEEDS`):
/// runs under 97% of the best in the last 30 s of a 130 s run.
#[test]
#[ignore]
fn study_settled() {
    let loads = env_list("RLBD_STUDY_LOADS", vec![0.85, 0.92, 0.95]);
    let seeds = env_list("RLBD_STUDY_SEEDS", (0..200).map(|s| s as f64).collect());
    for load in loads {
        let mut shares: Vec<(f64, u64)> = seeds
            .iter()
            .map(|&s| (settled_share(s as u64, load), s as u64))
            .collect();
        shares.sort_by(|a, b| a.0.total_cmp(&b.0));
        let under: Vec<u64> = shares.iter().filter(|s| s.0 < 0.97).map(|s| s.1).collect();
        println!(
            "load {:.0}%: settled under 97% {}/{}, worst {:.1}% (seed {}), median {:.1}%",
            load * 100.0,
            under.len(),
            shares.len(),
            shares[0].0 * 100.0,
            shares[0].1,
            shares[shares.len() / 2].0 * 100.0
        );
    }
}

/// A comma-separated list from the environment, or `default`.
/// The mean time to 95% over the runs that got there (99: never): the median of whole seconds
/// can flip on one run where half the runs take 8 s and half 9.
fn mean_reached(times: &[f64]) -> f64 {
    let got: Vec<f64> = times.iter().copied().filter(|&t| t < 99.0).collect();
    got.iter().sum::<f64>() / got.len().max(1) as f64
}

fn env_list(key: &str, default: Vec<f64>) -> Vec<f64> {
    std::env::var(key)
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or(default)
}

fn study_unfairness() -> f64 {
    env_f64("RLBD_STUDY_UNFAIR", UNFAIRNESS)
}

/// A study knob: `key`'s value as a number, or `default` when unset or not a number.
fn env_f64(key: &str, default: f64) -> f64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Figures over many seeds per load level, like the lab's table (not a check).
#[test]
#[ignore]
fn study() {
    let loads = env_list("RLBD_STUDY_LOADS", vec![0.70, 0.80, 0.85, 0.90, 0.92, 0.95]);
    let seeds: Vec<u64> = env_list("RLBD_STUDY_SEEDS", (0..200).map(|s| s as f64).collect())
        .into_iter()
        .map(|s| s as u64)
        .collect();
    let n = seeds.len();
    for load in loads {
        let mut shares = Vec::new();
        let mut times = Vec::new();
        let mut moves = Vec::new();
        let mut faults = 0;
        let mut slow_only = 0;
        let mut worst = (2.0, String::new());
        for &seed in &seeds {
            let o = evaluate(&scenario(
                seed,
                load * SENT,
                11,
                &[20.0; 4],
                study_unfairness(),
            ));
            shares.push(o.share);
            if o.share < 0.97 && o.placed_share >= 0.97 {
                slow_only += 1;
            }
            times.push(o.time_to_95.unwrap_or(99) as f64);
            moves.push(o.moves as f64);
            faults += o.faults.len();
            if !o.faults.is_empty() && std::env::var("RLBD_STUDY_FAULTS").is_ok() {
                println!("  seed {seed}: {:?}", o.faults);
            }
            if o.share < 0.97 && std::env::var("RLBD_STUDY_UNDER").is_ok() {
                let fin = o.log.lines().find(|l| l.starts_with("final")).unwrap_or("");
                println!(
                    "  {:.0}% seed {seed}: {:.1}% {fin}",
                    load * 100.0,
                    o.share * 100.0
                );
                if !o.reach.is_empty() {
                    println!("    mend: {}", o.reach);
                }
            }
            if o.share < worst.0 {
                worst = (o.share, format!("seed {seed}\n{}", o.log));
            }
        }
        let med = |v: &[f64]| {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let under = shares.iter().filter(|s| **s < 0.97).count();
        println!(
            "load {:.0}%: median {:.1}%, worst {:.1}%, under 97% {under}/{n}, median time to 95% {} s (mean of those that got there {:.2} s), worst {} s, median moves {}, max {}, faults {faults}, under 97% though placed within it {slow_only}",
            load * 100.0,
            med(&shares) * 100.0,
            worst.0 * 100.0,
            med(&times),
            mean_reached(&times),
            times.iter().copied().fold(0.0, f64::max),
            med(&moves),
            moves.iter().copied().fold(0.0, f64::max),
        );
        if std::env::var("RLBD_STUDY_WORST").is_ok() {
            println!("  worst: {}", worst.1);
        }
    }
}
