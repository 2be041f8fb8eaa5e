//! `rlbd simulate` end to end: the binary, real scenario files, JSON lines out.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

fn scenario(name: &str) -> String {
    format!("{}/tests/scenarios/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn simulate(path: &str) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_rlbd"))
        .args(["simulate", path])
        .output()
        .unwrap();
    ticks_of(path, out)
}

/// A successful run's JSON lines, one per second.
fn ticks_of(what: &str, out: std::process::Output) -> Vec<Value> {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn moves(ticks: &[Value]) -> Vec<(u64, String, String, String)> {
    let mut v = Vec::new();
    for t in ticks {
        for m in t["moves"].as_array().unwrap() {
            v.push((
                t["t"].as_u64().unwrap(),
                m["client"].as_str().unwrap().to_string(),
                m["from"].as_str().unwrap().to_string(),
                m["to"].as_str().unwrap().to_string(),
            ));
        }
    }
    v
}

#[test]
fn paper_scenario_moves_within_three_ticks_and_delivers_1_8_gbit() {
    let ticks = simulate(&scenario("paper.json"));
    let first_overload = ticks
        .iter()
        .position(|t| t["slaves"]["eth0"]["overloaded"] == true)
        .expect("never overloaded");
    let first_hot = ticks
        .iter()
        .position(|t| t["slaves"]["eth0"]["util"].as_f64().unwrap() > 0.8)
        .unwrap();
    let mv = moves(&ticks);
    eprintln!(
        "first hot sample t={first_hot}, overload declared t={first_overload}, moves: {mv:?}"
    );
    assert_eq!(mv.len(), 1, "exactly one move: {mv:?}");
    let (t_move, client, from, to) = &mv[0];
    assert!(client == "10.0.0.11" || client == "10.0.0.13");
    assert_eq!((from.as_str(), to.as_str()), ("eth0", "eth1"));
    assert!(
        *t_move as usize <= first_hot + 3,
        "move at {t_move}, overload from {first_hot}"
    );
    for t in &ticks[*t_move as usize + 1..] {
        let d = t["delivered_mbps"].as_f64().unwrap();
        assert!(d >= 1800.0, "t={} delivered {d}", t["t"]);
    }
    let before = ticks[first_hot]["delivered_mbps"].as_f64().unwrap();
    let after = ticks.last().unwrap()["delivered_mbps"].as_f64().unwrap();
    eprintln!("delivered before {before} Mbit/s, after {after} Mbit/s");
}

#[test]
fn lone_950_mbit_client_is_never_moved() {
    let ticks = simulate(&scenario("lone-elephant.json"));
    assert!(ticks
        .iter()
        .any(|t| t["slaves"]["eth0"]["overloaded"] == true));
    assert!(moves(&ticks).is_empty(), "{:?}", moves(&ticks));
}

#[test]
fn swinging_load_moves_no_client_more_than_once_per_hold_down() {
    let ticks = simulate(&scenario("swing.json"));
    let mv = moves(&ticks);
    assert!(!mv.is_empty(), "the swing must cause at least one move");
    let mut last: std::collections::HashMap<String, u64> = Default::default();
    for (t, client, ..) in &mv {
        if let Some(prev) = last.insert(client.clone(), *t) {
            assert!(t - prev >= 30, "{client} moved at {prev} and again at {t}");
        }
    }
    // Two moves when the `many` scenario was added (issue 27): no more since.
    assert!(mv.len() <= 2, "swing: {mv:?}");
    eprintln!(
        "swing: {} moves over {} ticks: {mv:?}",
        mv.len(),
        ticks.len()
    );
}

/// Moves the `many` scenario made when it was added (issue 27): sixteen clients on four 1 Gbit/s
/// ports, eight of them on one at first, their demands drawn anew every 12 s (60-85% of the
/// bond). Packing may get better; it must not get busier.
const MANY_MOVES: usize = 23;

/// Many clients whose demands change over time: no client moves more than twice within a
/// hold-down (one move and its one settling correction), none goes back within its hold-down
/// to the port it left, and no more moves than when the scenario was added.
#[test]
fn many_clients_changing_demands_move_at_most_twice_per_hold_down() {
    const HOLD: u64 = 30;
    let ticks = simulate(&scenario("many.json"));
    let mv = moves(&ticks);
    assert!(!mv.is_empty(), "the changing demands must cause moves");
    let mut per: std::collections::HashMap<&str, Vec<(u64, &str, &str)>> = Default::default();
    for (t, client, from, to) in &mv {
        per.entry(client.as_str())
            .or_default()
            .push((*t, from.as_str(), to.as_str()));
    }
    for (client, ms) in &per {
        for w in ms.windows(2) {
            let ((t1, left, _), (t2, _, to)) = (w[0], w[1]);
            assert!(
                t2 - t1 >= HOLD || to != left,
                "{client} back on {to} at {t2}, left it at {t1}: {ms:?}"
            );
        }
        for w in ms.windows(3) {
            assert!(
                w[2].0 - w[0].0 >= HOLD,
                "{client} moved thrice within {HOLD} s: {ms:?}"
            );
        }
    }
    assert!(
        mv.len() <= MANY_MOVES,
        "many: {} moves, {MANY_MOVES} when pinned: {mv:?}",
        mv.len()
    );
    eprintln!(
        "many: {} moves over {} ticks: {mv:?}",
        mv.len(),
        ticks.len()
    );
}

#[test]
fn failover_moves_clients_off_a_down_slave_at_once() {
    let ticks = simulate(&scenario("failover.json"));
    let mv = moves(&ticks);
    let at4: Vec<_> = mv.iter().filter(|m| m.0 == 4).collect();
    assert_eq!(at4.len(), 2, "{mv:?}");
    assert!(at4.iter().all(|m| m.2 == "eth1" && m.3 != "eth1"));
    assert_ne!(at4[0].3, at4[1].3, "spread over the live slaves: {at4:?}");
    // The updates go out when the carrier's message arrives, at the start of the second, and
    // the clients' caches take them at once: nothing is lost that second.
    assert_eq!(ticks[4]["delivered_mbps"].as_f64().unwrap(), 800.0);
    assert_eq!(ticks[5]["delivered_mbps"].as_f64().unwrap(), 800.0);
}

#[test]
fn stdin_is_read_with_dash() {
    let text = std::fs::read(scenario("lone-elephant.json")).unwrap();
    let out = simulate_stdin(&text);
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 15);
}

/// `rlbd simulate -` with `input` on its standard input.
fn simulate_stdin(input: &[u8]) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rlbd"))
        .args(["simulate", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// A shipped scenario's JSON.
fn scenario_json(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(scenario(name)).unwrap()).unwrap()
}

fn simulate_err(json: &str) -> String {
    let out = simulate_stdin(json.as_bytes());
    assert!(!out.status.success(), "accepted: {json}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn bad_input_is_a_one_line_error_naming_the_field() {
    let ok_slaves = r#""slaves":[{"name":"eth0","capacity_mbps":1000}]"#;
    let cases = [
        (
            format!(r#"{{{ok_slaves},"clients":[{{"ip":"a","slave":"eth9"}}],"ticks":[]}}"#),
            "clients[0].slave",
        ),
        (
            r#"{"slaves":[{"name":"eth0","capacity_mbps":-5}],"clients":[],"ticks":[]}"#
                .to_string(),
            "capacity_mbps",
        ),
        (
            format!(r#"{{{ok_slaves},"clients":[],"ticks":[{{"demand_mbps":{{"x":1}}}}]}}"#),
            "ticks[0].demand_mbps",
        ),
        (
            format!(r#"{{{ok_slaves},"clients":[],"ticks":[],"config":{{"threshold":2}}}}"#),
            "threshold",
        ),
        (
            format!(r#"{{{ok_slaves},"clients":[],"ticks":[],"config":{{"hits":5}}}}"#),
            "hits",
        ),
        (
            format!(
                r#"{{{ok_slaves},"clients":[],"ticks":[],"events":[{{"t":1,"slave":"nope","up":false}}]}}"#
            ),
            "events[0].slave",
        ),
        (r#"{"slaves": [ {"#.to_string(), "scenario"),
        (
            format!(r#"{{{ok_slaves},"clients":[],"ticks":[],"bogus":1}}"#),
            "bogus",
        ),
        (
            format!(r#"{{{ok_slaves},"elastic":{{"unfairness":0.5}}}}"#),
            "elastic.unfairness",
        ),
        (
            format!(r#"{{{ok_slaves},"elastic":{{"move_lag":1}}}}"#),
            "elastic.move_lag",
        ),
        (
            format!(
                r#"{{{ok_slaves},"random_demands":{{"seed":1,"load":0.9,"clients":4,"slave":"eth7","ticks":5}}}}"#
            ),
            "random_demands.slave",
        ),
        (
            format!(
                r#"{{{ok_slaves},"clients":[{{"ip":"a","slave":"eth0"}}],"random_demands":{{"seed":1,"load":0.9,"clients":4,"slave":"eth0","ticks":5}}}}"#
            ),
            "random_demands",
        ),
        (
            format!(
                r#"{{{ok_slaves},"random_demands":{{"seed":1,"load":3,"clients":4,"slave":"eth0","ticks":5}}}}"#
            ),
            "random_demands.total",
        ),
    ];
    for (json, field) in cases {
        let err = simulate_err(&json);
        assert!(err.contains(field), "error {err:?} does not name {field}");
    }
}

/// The packing scenarios (issue 15): four 20 Mbit/s slaves that read 97% when saturated, eleven
/// clients with demands drawn from a seed, all starting on p0, TCP-unfair shares, moves a fifth
/// of a second late. Their loads are the namespace lab's 70%, 85%, 92% and 95% (sums of the
/// clients' caps), scaled by the 95.7% of its cap that a TCP client there sends. The goodput
/// from 10 s on must be within 97% of the best placement; no client moves twice.
#[test]
fn packing_scenarios_reach_97_percent_of_the_best_placement() {
    for level in ["70", "85", "92", "95"] {
        let path = scenario(&format!("packing-{level}.json"));
        let parsed = rlbd::simulate::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let caps: Vec<f64> = parsed
            .slaves
            .iter()
            .map(|s| s.capacity_mbps * parsed.elastic.efficiency)
            .collect();
        let demands: Vec<f64> = parsed
            .clients
            .iter()
            .map(|c| {
                parsed
                    .ticks
                    .iter()
                    .rev()
                    .find_map(|t| t.demand_mbps.as_ref()?.get(&c.ip).copied())
                    .unwrap()
            })
            .collect();
        let best = rlbd::simulate::ideal::best_delivered(&caps, &demands);
        let ticks = simulate(&path);
        let judged: Vec<f64> = ticks[11..]
            .iter()
            .map(|t| t["delivered_mbps"].as_f64().unwrap())
            .collect();
        let share = judged.iter().sum::<f64>() / judged.len() as f64 / best;
        let mv = moves(&ticks);
        eprintln!(
            "packing-{level}: {:.1}% of the best ({best:.1} Mbit/s), {} moves",
            share * 100.0,
            mv.len()
        );
        assert!(
            share >= 0.97,
            "packing-{level}: {share:.3} of the best; {mv:?}"
        );
        let mut seen = std::collections::HashSet::new();
        assert!(mv.iter().all(|m| seen.insert(m.1.clone())), "{mv:?}");
    }
}

/// `scenario` with `sampling` added, through stdin.
fn simulate_with_sampling(name: &str, sampling: &Value) -> Vec<Value> {
    let mut s = scenario_json(name);
    s["sampling"] = sampling.clone();
    ticks_of(name, simulate_stdin(&serde_json::to_vec(&s).unwrap()))
}

/// The largest sampling ratio any port had.
fn most_sampled(ticks: &[Value]) -> u64 {
    ticks
        .iter()
        .flat_map(|t| t["slaves"].as_object().unwrap().values())
        .filter_map(|s| s["one_in"].as_u64())
        .max()
        .unwrap_or(1)
}

/// Clients of `name` that are interchangeable: they start on the same slave and the scenario
/// gives them the same demand every second (the planner's choice between them is a tie).
fn tied(name: &str, a: &str, b: &str) -> bool {
    let s = scenario_json(name);
    let start = |ip: &str| {
        s["clients"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["ip"] == ip))
            .map(|c| c["slave"].clone())
    };
    let ticks = s["ticks"].as_array().cloned().unwrap_or_default();
    start(a).is_some()
        && start(a) == start(b)
        && ticks
            .iter()
            .all(|t| t["demand_mbps"][a] == t["demand_mbps"][b])
}

/// The same moves at the same seconds, a client standing for one it is tied with; with
/// `any_target`, a move may land on another port (two targets equally loaded: the engine weighs
/// the moved client by its sampled estimate, and the tie falls either way).
fn same_moves(
    name: &str,
    exact: &[(u64, String, String, String)],
    sampled: &[(u64, String, String, String)],
    any_target: bool,
) -> bool {
    exact.len() == sampled.len()
        && exact.iter().zip(sampled).all(|(e, s)| {
            (e.0, &e.2) == (s.0, &s.2)
                && (e.3 == s.3 || any_target)
                && (e.1 == s.1 || tied(name, &e.1, &s.1))
        })
}

/// Moves and the Mbit/s delivered over the run.
fn outcome(ticks: &[Value]) -> (usize, f64) {
    let moves = ticks
        .iter()
        .map(|t| t["moves"].as_array().unwrap().len())
        .sum();
    let delivered = ticks
        .iter()
        .map(|t| t["delivered_mbps"].as_f64().unwrap())
        .sum();
    (moves, delivered)
}

/// Every shipped scenario decides as with exact counting when its ports are sampled as the
/// kernel samples a busy port: 64-byte packets, so a full 1 Gbit/s port sends about 2 million a
/// second and is counted one in 32 at the default limit, one in 256 at a limit of 10,000 (a
/// full 20 Mbit/s packing port, 39,000 a second, one in 4 there), each client's count drawn at
/// random. Port loads stay exact; only the split among clients is estimated.
/// - A scenario of a few clients of distinct sizes makes the same moves at the same seconds
///   (two identical clients may trade places); where the run delivers exactly as much, a move
///   may land on another port (`failover`: after the first client's move the two targets are
///   equally loaded, one by its exact counter, the other by the client's estimate).
/// - Where many clients are within the estimate's error of one another (`many`, the packing
///   runs), the planner may pick another of them and the runs part: there the sampled run
///   delivers at least 99.4% of what the exact one does, with at most a quarter more moves
///   (and two). (A daemon that was running before the load came samples from the second
///   tick: `many` at seed 1 delivers 99.43%.)
#[test]
fn every_scenario_decides_the_same_when_its_ports_are_sampled() {
    let names: Vec<String> = std::fs::read_dir(scenario(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    assert!(names.len() >= 9, "{names:?}");
    let mut differ = Vec::new();
    let mut sampled_runs = 0;
    for name in &names {
        let exact_ticks = simulate(&scenario(name));
        let exact = moves(&exact_ticks);
        let (exact_moves, exact_delivered) = outcome(&exact_ticks);
        let s = scenario_json(name);
        let few = s["clients"].as_array().is_some_and(|c| c.len() <= 4);
        for (limit, seed) in [(100_000, 1), (100_000, 2), (10_000, 3), (10_000, 4)] {
            let spec = serde_json::json!({
                "packet_bytes": 64, "max_frames_per_sec": limit, "seed": seed
            });
            let ticks = simulate_with_sampling(name, &spec);
            if limit == 10_000 {
                assert!(most_sampled(&ticks) >= 4, "{name}: hardly sampled");
            }
            sampled_runs += usize::from(most_sampled(&ticks) > 1);
            let sampled = moves(&ticks);
            let (n, delivered) = outcome(&ticks);
            let same = same_moves(name, &exact, &sampled, delivered == exact_delivered);
            let as_good = delivered >= 0.994 * exact_delivered && n <= exact_moves * 5 / 4 + 2;
            if !(same || (!few && as_good)) {
                differ.push(format!(
                    "{name} (limit {limit}, seed {seed}): exact {exact_moves} moves, \
                     {exact_delivered:.0} Mbit delivered; sampled {n}, {delivered:.0}\n  \
                     exact {exact:?}\n  sampled {sampled:?}"
                ));
            }
        }
    }
    assert!(sampled_runs >= 20, "only {sampled_runs} runs were sampled");
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// On a bond (`"bond": true`) the driver is part of the story: when the active slave (eth0)
/// fails, its MAC moves to eth1, so rlbd fails over eth1's client too (its frames would reach
/// the dead slave); when eth0 returns, the driver deals every client anew and tells them at
/// once, and the load settles with every client delivered and no slave over 80%. On plain
/// ports the same story has neither.
#[test]
fn on_a_bond_the_driver_swaps_macs_and_deals_clients_and_rlbd_follows() {
    let path = scenario("bond-active.json");
    let bond = simulate(&path);
    let moved = moves(&bond);
    let at5: Vec<_> = moved.iter().filter(|m| m.0 == 5).collect();
    assert!(at5.iter().any(|m| m.1 == "10.0.0.3"), "{moved:?}");
    assert!(at5.iter().all(|m| m.3 != "eth0"), "{moved:?}");
    let rx =
        |ticks: &[Value], t: usize, s: &str| ticks[t]["slaves"][s]["rx_mbps"].as_f64().unwrap();
    let delivered = |ticks: &[Value], t: usize| ticks[t]["delivered_mbps"].as_f64().unwrap();
    for t in 6..15 {
        assert_eq!(
            (delivered(&bond, t), rx(&bond, t, "eth0")),
            (140.0, 0.0),
            "t={t}"
        );
    }
    // The driver's round when eth0 returns puts clients there at once.
    assert!(rx(&bond, 15, "eth0") > 0.0, "{:?}", bond[15]);
    for t in 17..30 {
        assert_eq!(delivered(&bond, t), 140.0, "t={t}");
        for s in ["eth0", "eth1", "eth2"] {
            assert!(rx(&bond, t, s) <= 80.0, "t={t} {s}: {:?}", bond[t]);
        }
    }
    // Plain ports: no MAC moves (eth1's client stays), nobody is dealt back to eth0.
    let mut text: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    text["bond"] = Value::Bool(false);
    let plain = ticks_of("plain", simulate_stdin(text.to_string().as_bytes()));
    assert!(moves(&plain).iter().all(|m| m.1 != "10.0.0.3"), "{plain:?}");
    assert_eq!(rx(&plain, 5, "eth1") + rx(&plain, 5, "eth2"), 140.0);
    assert!((5..30).all(|t| rx(&plain, t, "eth0") == 0.0));
}

/// Guests behind a bridge over the bond (`guests`): the switch learns each where rlbd announced
/// it, so their traffic is spread over the slaves (the kernel alone would take it all on the
/// active one); a slave's failure fails its guests and clients over at once, and when it returns
/// a guest is moved back onto it by the overload rule.
#[test]
fn guests_are_spread_failed_over_and_moved_back() {
    let ticks = simulate(&scenario("guests.json"));
    let rx = |t: usize, s: &str| ticks[t]["slaves"][s]["rx_mbps"].as_f64().unwrap();
    let delivered = |t: usize| ticks[t]["delivered_mbps"].as_f64().unwrap();
    // Placed within the first second: every guest and the client received in full, on both
    // slaves, neither over 80%.
    for (t, tick) in ticks.iter().enumerate().take(15).skip(1) {
        assert_eq!(delivered(t), 150.0, "t={t}: {tick:?}");
        assert!(rx(t, "eth0") <= 80.0 && rx(t, "eth1") <= 80.0, "{tick:?}");
    }
    let moved = moves(&ticks);
    let at15: Vec<_> = moved.iter().filter(|m| m.0 == 15).collect();
    assert!(at15.iter().any(|m| m.1 == "10.0.0.1"), "{moved:?}");
    assert!(at15.iter().any(|m| m.1.starts_with("vm")), "{moved:?}");
    assert!(at15
        .iter()
        .all(|m| (m.2.as_str(), m.3.as_str()) == ("eth1", "eth0")));
    for t in 15..22 {
        assert_eq!((rx(t, "eth0"), rx(t, "eth1")), (100.0, 0.0), "t={t}");
    }
    let back: Vec<_> = moved.iter().filter(|m| m.0 >= 22).collect();
    assert!(
        back.iter()
            .any(|m| m.0 <= 24 && m.1.starts_with("vm") && m.3 == "eth1"),
        "{moved:?}"
    );
    assert!((25..30).all(|t| delivered(t) == 150.0), "{ticks:?}");
}

/// `--log LEVEL`: the engine's records on standard error with their simulated time (why it
/// moved, or did not), the JSON lines on standard output unchanged.
#[test]
fn log_prints_the_engine_s_records_with_their_time() {
    let path = scenario("failover.json");
    let plain = simulate(&path);
    let out = Command::new(env!("CARGO_BIN_EXE_rlbd"))
        .args(["simulate", "--log", "info", &path])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(ticks_of(&path, out), plain);
    let lines: Vec<&str> = err.lines().collect();
    assert!(lines.iter().all(|l| l.starts_with("t=")), "{err}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("t=4.") && l.contains("eth1 is down")),
        "{err}"
    );
    assert!(
        lines.iter().filter(|l| l.contains("failover")).count() >= 2,
        "{err}"
    );
    // Debug shows more (here the guests' placements); an unknown level is a usage error.
    let records = |level: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_rlbd"))
            .args(["simulate", "--log", level, &scenario("guests.json")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).lines().count()
    };
    assert!(records("debug") > records("info"));
    let bad = Command::new(env!("CARGO_BIN_EXE_rlbd"))
        .args(["simulate", "--log", "loud", &path])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(64), "{bad:?}");
}
