//! The packing bench (issue 15; see lab/src/packing/mod.rs): rlbd against the best placement on a
//! nearly full bond of namespace ports. Root only. Prints a line per run and a table per load
//! level; exits non-zero when any run stays under the goal (97% of the control's goodput) —
//! the short form when a demand set's median run does, or any run falls under 85%.
//!
//!   cargo bench --bench packing                      the full bench (~20 min)
//!   cargo bench --bench packing -- --short           the CI form (~50 s once built)
//!   cargo bench --bench packing -- --loads 0.92 --seeds 4,5 --reps 2 --clients 12
//!   cargo bench --bench packing -- --daemon-exe OLD/rlbd   an older build's planner, same lab
//!
//! Without root it says "skipped: needs root" and succeeds, unless RLBD_REQUIRE_ROOT_TESTS=1.

use std::path::PathBuf;
use std::process::ExitCode;

use rlbd_lab::packing::{self, BenchConfig};

fn list<T: std::str::FromStr>(flag: &str, v: Option<String>) -> Result<Vec<T>, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
    v.split(',')
        .map(|x| {
            x.trim()
                .parse()
                .map_err(|_| format!("{flag}: {x:?} is not a number"))
        })
        .collect()
}

fn one<T: std::str::FromStr>(flag: &str, v: Option<String>) -> Result<T, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
    v.parse()
        .map_err(|_| format!("{flag}: {v:?} is not a number"))
}

fn config() -> Result<BenchConfig, String> {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_rlbd"));
    let lab_exe = rlbd_lab::exe_beside(&exe)?;
    let logs = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("packing");
    let mut args = std::env::args().skip(1).peekable();
    let mut cfg = if std::env::args().any(|a| a == "--short") {
        BenchConfig::short(exe, lab_exe, logs)
    } else {
        BenchConfig::full(exe, lab_exe, logs)
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            // cargo bench passes --bench; libtest-style filters are not used here.
            "--bench" | "--short" => {}
            "--loads" => cfg.loads = list(&a, args.next())?,
            "--seeds" => cfg.seeds = list(&a, args.next())?,
            "--reps" => cfg.reps = one(&a, args.next())?,
            "--clients" => cfg.clients = one(&a, args.next())?,
            "--run-secs" => cfg.run_secs = one(&a, args.next())?,
            "--judge-from" => cfg.judge_from = one(&a, args.next())?,
            "--goal" => cfg.goal = one(&a, args.next())?,
            "--daemon-exe" => {
                cfg.daemon_exe = Some(PathBuf::from(
                    args.next().ok_or("--daemon-exe needs a value")?,
                ))
            }
            "--daemon-arg" => cfg
                .daemon_args
                .push(args.next().ok_or("--daemon-arg needs a value")?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if cfg.judge_from >= cfg.run_secs - 1.0 {
        return Err("--judge-from must be at least 1 s before --run-secs".into());
    }
    Ok(cfg)
}

fn main() -> ExitCode {
    let cfg = match config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("packing bench: {e}");
            return ExitCode::from(2);
        }
    };
    if !rlbd_lab::netns::is_root() {
        if std::env::var("RLBD_REQUIRE_ROOT_TESTS").is_ok_and(|v| v == "1") {
            eprintln!("packing bench: needs root, and RLBD_REQUIRE_ROOT_TESTS=1 requires it");
            return ExitCode::FAILURE;
        }
        println!("packing bench: skipped: needs root");
        return ExitCode::SUCCESS;
    }
    println!(
        "packing bench: {} ports x {} Mbit/s, {} clients all starting on p0; loads {:?}, seeds {:?}, {} run(s) each; judged from {} s to {} s after traffic start; goal {:.0}% of the control in every run",
        cfg.ports, cfg.cap_mbit, cfg.clients, cfg.loads, cfg.seeds, cfg.reps, cfg.judge_from, cfg.run_secs, cfg.goal * 100.0
    );
    let mut out = std::io::stdout();
    let results = match packing::run(&cfg, &mut out) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("packing bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("\n{}", packing::table(&results));
    let low = packing::failures(&cfg, &results);
    let judged = match cfg.floor {
        Some(f) => format!(
            "each demand set's median run at {:.0}% of the control or more, every run at {:.0}% or more",
            cfg.goal * 100.0,
            f * 100.0
        ),
        None => format!("every run at {:.0}% of the control or more", cfg.goal * 100.0),
    };
    if low.is_empty() {
        println!("passed: {judged}");
        ExitCode::SUCCESS
    } else {
        println!("failed: {judged}; not so:\n{}", low.join("\n"));
        ExitCode::FAILURE
    }
}
