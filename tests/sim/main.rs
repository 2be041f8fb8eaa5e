//! A deterministic simulation of rlbd's engine on a simulated LAN (ideas from FoundationDB's
//! simulator and TigerBeetle's VOPR): the real `Engine` and the real frame codecs, ports that
//! fail and return, clients with Linux-like neighbour caches arriving and leaving, elastic
//! demand, the server kernel's neighbour table, restarts with and without the state file,
//! refused sends, netlink overruns, reloads and a foreign claim of the server's address, on a
//! simulated clock. The LAN (ports, clients and their neighbour caches, the server kernel's
//! table, the bond's driver, guests and the switch) is `rlbd::simulate::lan`, the model
//! `rlbd simulate` runs too; this harness adds the faults, the shell and the checks. Rules are
//! checked on every frame and after every simulated second, each by a named check
//! (`checks.rs`); a broken rule fails with the check, the seed and the last events.
//!
//! The links change too: carriers fail and flap (back within 0.2-3 s), a bond's active slave
//! fails and the driver swaps its MAC with the next one's, slaves are renamed while up, released
//! and replaced; every third seed has one slow port (a tenth or a quarter of the others'), and
//! every third seed on a bond a client table smaller than its population (it evicts).
//!
//! Guests (issue 38): on every bond seed but every fifth (1, 3, 7, 9, 11, ...) the bond is the
//! port of a bridge with 4 to 28 guests behind it, arriving, leaving (gone from the FDB, or
//! migrated: seen from the switch), sharing the slaves with the clients, behind a switch that
//! learns (`lan/guests.rs`, `lan/switch.rs`); the shell's guest path is `guest_shell.rs`, their checks
//! `guest_rules.rs`.
//!
//! The shell's outputs are carried out as the daemon's shell does: each port's counting program
//! goes where the engine says or is refused (`counting.rs`): seeds 1, 5, ... count at the tc
//! hook, 3, 7, ... on the socket's filter (tc refused), 2, 6, ... at tc sampled 1 in N at a low
//! `max_frames_per_sec`, and 4, 8, ... count captured frames (both hooks refused), each kept
//! frame an `Input::Counted`, sampled by the capture filter, their rings dropping frames now
//! and then (the drop veto must hold); the ratio the engine sets is the one the world applies
//! (the `Sampling` check holds it to its rule). A netlink overrun loses the world's messages of
//! that moment, and the engine's re-dump is answered through the real resync mirror, each dump
//! ending in the sweep's removals and `DumpDone` (`resync.rs`, the `Resync` check). The server
//! broadcasts ARP requests and re-announces its addresses (gratuitous ARP, an unsolicited NA),
//! which every client hears and the bond's driver follows up (`server_arp.rs`): rlbd must put
//! its moved clients back (`Reassertion`).
//!
//! `RLBD_SIM_SEED=n` (one seed), `RLBD_SIM_SEEDS=a,b,c`, `RLBD_SIM_DAYS=d` (per seed);
//! `RLBD_SIM_SMALL_TABLE=1` gives every seed on a bond the small table, `=0` none;
//! `RLBD_SIM_GUESTS=1` gives every seed on a bond guests, `=0` none;
//! `RLBD_SIM_COUNTING=tc|socket|hook|frames` gives every seed that way of counting;
//! `RLBD_SIM_WATCH=text` traces every engine log line containing it (a client's address),
//! `RLBD_SIM_LOG=debug` with the engine's debug lines.

use rlbd::simulate::lan::{clients, nd, World};

mod alloc;
mod balance;
mod checks;
mod counting;
mod driver;
mod guest_rules;
mod guest_shell;
mod limits;
mod moves;
mod relink;
mod restart;
mod resync;
mod rules;
mod run;
mod server_arp;
mod setup;
mod shrink;
mod trace;
mod wire;

use std::time::Instant;

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

/// Seeds and days per seed from the environment, or the defaults.
fn plan(default_seeds: &[u64], default_days: f64) -> (Vec<u64>, f64) {
    let seeds = match (
        std::env::var("RLBD_SIM_SEED"),
        std::env::var("RLBD_SIM_SEEDS"),
    ) {
        (Ok(s), _) => vec![s.trim().parse().expect("RLBD_SIM_SEED: a number")],
        (_, Ok(s)) => s
            .split(',')
            .map(|x| x.trim().parse().expect("RLBD_SIM_SEEDS: numbers"))
            .collect(),
        _ => {
            // CI adds a seed drawn from the commit (tests/run-all.sh prints it): each commit
            // explores a LAN of its own besides the fixed ones.
            let mut s = default_seeds.to_vec();
            if let Some(x) = std::env::var("RLBD_SIM_EXTRA_SEED")
                .ok()
                .and_then(|x| x.parse().ok())
            {
                s.push(x);
            }
            s
        }
    };
    let days = std::env::var("RLBD_SIM_DAYS")
        .ok()
        .map(|d| d.parse().expect("RLBD_SIM_DAYS: a number"))
        .unwrap_or(default_days);
    (seeds, days)
}

/// Runs `f` on every seed, the seeds shared among the machine's cores (each run is one thread's
/// and owns its world; results come back in the seeds' order).
fn on_cores<T: Send>(seeds: &[u64], f: impl Fn(u64) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads.min(seeds.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&seed) = seeds.get(i) else { break };
                let r = f(seed);
                done.lock().unwrap().push((i, r));
            });
        }
    });
    let mut done = done.into_inner().unwrap();
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

fn run_all(seeds: &[u64], days: f64) {
    let started = Instant::now();
    let results = on_cores(seeds, |seed| {
        let t = Instant::now();
        let setup = setup::Setup::new(seed, days).with_env();
        let result = run::run(&setup);
        (setup, result, t.elapsed().as_secs_f64())
    });
    let mut failures = Vec::new();
    for (setup, result, secs) in results {
        let seed = setup.seed;
        match result {
            Ok(summary) => println!(
                "seed {seed}: {days} simulated days in {secs:.1} s ({:.1} days/min): {summary}",
                days / (secs / 60.0)
            ),
            Err(failure) => failures.push(shrink::report(&setup, &failure)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    let mins = started.elapsed().as_secs_f64() / 60.0;
    let total_days = days * seeds.len() as f64;
    println!(
        "simulation: {total_days} simulated days over {} seeds in {:.1} s on {} threads: {:.1} simulated days per wall minute ({} build)",
        seeds.len(),
        mins * 60.0,
        std::thread::available_parallelism().map_or(1, |n| n.get()).min(seeds.len()),
        total_days / mins,
        if cfg!(debug_assertions) { "debug" } else { "release" }
    );
}

/// CI: at least 30 simulated days in all.
#[test]
fn simulated_month() {
    let (seeds, days) = plan(&[1, 2, 3, 4, 5, 6], 5.0);
    run_all(&seeds, days);
}

/// A simulated year (`RLBD_SIM_DAYS=365`):
/// `cargo test --release --features rule-switches --test sim -- --ignored`.
#[test]
#[ignore]
fn simulated_year() {
    let (seeds, days) = plan(&[2026], 365.0);
    run_all(&seeds, days);
}

/// The same seed twice gives the same run: every event noted hashes the same.
#[test]
fn a_seed_runs_the_same_twice() {
    let setup = setup::Setup::new(11, 0.25);
    let a = run::run(&setup).expect("seed 11 runs");
    let b = run::run(&setup).expect("seed 11 runs again");
    let hash = |s: &str| s.rsplit("trace hash ").next().map(str::to_string);
    assert!(a.contains("trace hash "), "{a}");
    assert_eq!(
        hash(&a),
        hash(&b),
        "seed 11 ran differently the second time"
    );
}

/// The frame rule bites: an update to a MAC the server's neighbour table does not confirm, and
/// one claiming another address, are caught.
#[test]
fn frame_rule_bites() {
    let world = World::new(7, 2, 10, false);
    let mut rules = rules::Rules::new(8, 1000, &Default::default());
    let stranger = rlbd::Mac(2, 0x77, 0, 0, 0, 1);
    let port = world.ports[1].mac;
    let f = clients::arp_frame(stranger, 2, port, clients::SERVER, port, clients::SERVER);
    assert!(rules.on_sent(0, &world, 1, &f).is_err(), "unconfirmed MAC");
    let other = std::net::Ipv4Addr::new(198, 18, 0, 9);
    let f = clients::arp_frame(stranger, 2, port, other, port, other);
    assert!(
        rules.on_sent(0, &world, 1, &f).is_err(),
        "not the server's address"
    );
    let learning = rlbd::steer::learning_frame(port);
    assert!(
        rules.on_sent(0, &world, 1, &learning).is_ok(),
        "a learning frame"
    );
}

/// The per-frame path allocates nothing: once the LAN is up and its clients are in the table,
/// a counted frame of theirs costs the engine no allocation.
#[test]
fn a_counted_frame_allocates_nothing() {
    let mut d = driver::Driver::new(2, 4, 40, None);
    for sec in 1..=120 {
        d.run_deadlines(sec * 1000);
        d.now = sec * 1000;
        d.world.tick_clients(d.now);
        d.flush_world();
        d.second();
    }
    let keys: Vec<_> = d
        .world
        .clients
        .iter()
        .filter(|c| c.present && c.ip6.is_none())
        .map(|c| (rlbd::client::ClientKey::new(c.mac, c.vlan), c.ip, c.server))
        .collect();
    assert!(keys.len() > 10, "{} clients", keys.len());
    let before = alloc::count();
    for round in 0..1000u64 {
        for (i, (key, ip, server)) in keys.iter().enumerate() {
            let input = rlbd::engine::Input::Counted {
                port: rlbd::engine::PortId::new(i % 4),
                key: *key,
                src: (*ip).into(),
                dst: (*server).into(),
                bytes: 1500 - round % 100,
                for_host: true,
                dst_mac: rlbd::Mac(2, 0, 0, 0, 0, 1),
            };
            d.engine.handle(d.now, input);
        }
    }
    let made = alloc::count() - before;
    println!("{} counted frames: {made} allocations", keys.len() * 1000);
    assert_eq!(made, 0, "allocations on the per-frame path");
    // The per-second path: a calm LAN (nobody arrives or leaves), its first 30 s to let the
    // reused buffers grow to it, then a minute measured. A second that hands nothing out
    // (no frame, log record, summary or state file) allocates nothing; the others build what
    // they hand out, and are counted apart.
    d.world.calm = true;
    let calm_second = |d: &mut driver::Driver, sec: u64| {
        d.run_deadlines(sec * 1000);
        d.now = sec * 1000;
        d.world.tick_clients(d.now);
        d.flush_world();
        d.second();
    };
    for sec in 121..=150 {
        calm_second(&mut d, sec);
    }
    let (a0, s0) = (d.stats.allocs_second, d.stats.seconds);
    let (q0, qa0) = (d.stats.calls_quiet, d.stats.allocs_quiet);
    for sec in 151..=210 {
        calm_second(&mut d, sec);
    }
    let per = (d.stats.allocs_second - a0) as f64 / (d.stats.seconds - s0) as f64;
    let (calls, quiet) = (d.stats.calls_quiet - q0, d.stats.allocs_quiet - qa0);
    println!(
        "a calm second with {} clients: {per:.0} allocations in the engine on average; \
         {calls} quiet calls (no frame, log, summary or state file handed out) made {quiet}",
        keys.len()
    );
    assert_eq!(quiet, 0, "allocations on the quiet per-second path");
}

/// The simulation's ND frames are the bytes rlbd itself would build for the same update (the
/// checksum included), and parse as Neighbor Discovery.
#[test]
fn nd_frames_are_real() {
    let (client, port) = (rlbd::Mac(2, 0xaa, 0, 0, 0, 1), rlbd::Mac(2, 0, 0, 0, 1, 2));
    let ip6: std::net::Ipv6Addr = "2001:db8::11".parse().unwrap();
    let ours = nd::na_frame(client, (port, nd::SERVER6), ip6, nd::SERVER6, false, true);
    let rlbds = rlbd::steer::neighbor_advertisement(client, ip6, port, nd::SERVER6);
    assert_eq!(ours, rlbds.to_vec());
    let ns = nd::ns_frame(port, (client, ip6), nd::SERVER6, nd::SERVER6);
    assert!(matches!(
        rlbd::capture::parse(&ns),
        Some(rlbd::capture::Frame::Nd { kind: rlbd::capture::NdKind::Ns, lladdr: Some(m), .. }) if m == client
    ));
}

/// Prove that it bites: each rule the engine keeps, switched off or kept a little short, is
/// caught within a simulated day or two on some seed, by the check that guards that rule (not
/// by another one that happened to fail first). The seed, the simulated time and the wall time
/// are printed. (`RLBD_SIM_MUTATION_DAYS`: the budget per seed; `RLBD_SIM_MUTATION`: one.)
#[test]
fn every_mutation_is_caught_by_its_own_check() {
    use checks::Mutation;
    let budget: f64 = std::env::var("RLBD_SIM_MUTATION_DAYS")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(2.0);
    let only = std::env::var("RLBD_SIM_MUTATION").ok();
    let mutations: Vec<Mutation> = Mutation::ALL
        .into_iter()
        .filter(|m| only.as_ref().is_none_or(|o| *o == m.name()))
        .collect();
    // The mutations share the cores; each tries seeds 1-6 in turn until one fails.
    let indices: Vec<u64> = (0..mutations.len() as u64).collect();
    let results = on_cores(&indices, |i| {
        let m = mutations[i as usize];
        let t = Instant::now();
        // The answered clients' failover is plain ports' (even seeds): they go first for it.
        let seeds = match m.catcher() {
            checks::Check::AnsweredFailover => [2u64, 4, 6, 1, 3, 5],
            // The guests are on seeds 1 and 3.
            checks::Check::GuestHoldDown
            | checks::Check::GuestAnnounce
            | checks::Check::GuestRelease
            | checks::Check::GuestFailover
            | checks::Check::GuestBalance => [3, 1, 5, 2, 4, 6],
            // The veto is of rings that carry the counted frames (seed 4 counts captured ones).
            checks::Check::RingDropVeto => [4, 1, 2, 3, 5, 6],
            _ => [1, 2, 3, 4, 5, 6],
        };
        let caught = seeds.into_iter().find_map(|seed| {
            let mut setup = setup::Setup::new(seed, budget);
            setup.mutate = Some(m);
            run::run(&setup).err().map(|f| (seed, f))
        });
        (m, caught, t.elapsed().as_secs_f64())
    });
    let mut wrong = Vec::new();
    println!("| mutation | caught by | seed | simulated s | wall s |");
    println!("|---|---|---|---|---|");
    for (m, caught, secs) in results {
        let Some((seed, f)) = caught else {
            println!(
                "| {} | NOT CAUGHT in {budget} days on seeds 1-6 | | | {secs:.1} |",
                m.name()
            );
            wrong.push(format!("{}: not caught", m.name()));
            continue;
        };
        println!(
            "| {} | {:?} | {seed} | {:.0} | {secs:.1} |",
            m.name(),
            f.check,
            f.at_ms as f64 / 1000.0
        );
        println!("    {}", f.why.lines().next().unwrap_or(""));
        if f.check != m.catcher() {
            wrong.push(format!(
                "{}: caught first by {:?}, not by its own check {:?}, on seed {seed}: {}",
                m.name(),
                f.check,
                m.catcher(),
                f.why
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
