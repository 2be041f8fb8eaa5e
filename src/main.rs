//! Thin: parse the command line, call into the library, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;
use rlbd::cli::{escaped_name_error, Cli, Command, RunArgs};
use rlbd::config::{self, Target};
use rlbd::daemon::Daemon;
use rlbd::exit::{EX_CONFIG, EX_DATAERR};

/// The error line goes out before (or without) the logger: at `err` when stderr is the journal.
fn fail(what: &str, e: impl std::fmt::Display, code: u8) -> ExitCode {
    eprintln!("{}rlbd {what}: {e}", rlbd::logging::error_prefix());
    ExitCode::from(code)
}

fn run(args: RunArgs) -> ExitCode {
    if let Some(e) = args.bond.as_deref().and_then(escaped_name_error) {
        return fail("run", e, EX_CONFIG);
    }
    let target = match (args.bond.clone(), args.ports.is_empty()) {
        (Some(b), _) => Some(Target::Bond(b)),
        (None, false) => Some(Target::Ports(args.ports.clone())),
        (None, true) => None,
    };
    let make = {
        let knobs = args.knobs.clone();
        let target = target.clone();
        let dry_run = args.dry_run;
        let (socket, metrics, interval) = (
            args.control_socket.clone(),
            args.metrics_file.clone(),
            args.metrics_interval,
        );
        move || {
            let mut s = config::resolve(&knobs, target.clone(), dry_run)?;
            s.override_observability(socket.clone(), metrics.clone(), interval)?;
            Ok(s)
        }
    };
    let settings = match make() {
        Ok(s) => s,
        Err(e) => return fail("run", e, EX_CONFIG),
    };
    let instance = settings.target.as_ref().map(Target::instance);
    rlbd::logging::init(&settings.log_level, instance);
    let result =
        Daemon::new(settings, Box::new(make), args.state_file.clone()).and_then(Daemon::run);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Under systemd the last words go to the stream, not the journal's socket: a record
            // sent just before the exit may be read after the process is gone, and then the
            // journal cannot tell its unit (`journalctl -u` would miss it).
            if rlbd::logging::stderr_is_journal() {
                eprintln!("<3>{e}");
            } else {
                log::error!("{e}");
                // The log may be filtered; the exit reason must always show.
                if !log::log_enabled!(log::Level::Error) {
                    eprintln!("rlbd run: {e}");
                }
            }
            ExitCode::from(e.code)
        }
    }
}

/// `bond`: the file `rlbd run --bond NAME` would read, chosen the same way.
fn check_config(file: Option<std::path::PathBuf>, bond: Option<String>) -> ExitCode {
    if let Some(e) = bond.as_deref().and_then(escaped_name_error) {
        return fail("check-config", e, EX_CONFIG);
    }
    let knobs = config::Overrides {
        config: file,
        ..Default::default()
    };
    // Only `--bond NAME` looks at the live bond: a file checked on another host (or before
    // its bond exists) is checked as a file.
    let live = bond.is_some();
    match config::resolve(&knobs, bond.map(Target::Bond), false) {
        Ok(s) => {
            match &s.config_path {
                Some(p) => println!("# {}: valid; effective settings:", p.display()),
                None => println!(
                    "# no {}: built-in defaults; effective settings:",
                    config::DEFAULT_CONFIG_PATH
                ),
            }
            print!("{}", s.to_toml());
            if !live {
                return ExitCode::SUCCESS;
            }
            // With --bond: the live bond, as `run` would see it at start.
            match rlbd::daemon::check_live(&s) {
                Ok(lines) => {
                    for l in lines {
                        println!("# {l}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    let code = e.code;
                    fail("check-config", e, code)
                }
            }
        }
        Err(e) => fail("check-config", e, EX_CONFIG),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and --version to stdout, a mistake with its usage to stderr.
            let _ = e.print();
            return ExitCode::from(rlbd::cli::parse_exit_code(&e));
        }
    };
    match cli.command {
        Command::Run(args) => run(args),
        Command::CheckConfig { file, bond } => check_config(file, bond),
        Command::Simulate { file, log } => match rlbd::simulate::main(&file, log) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail("simulate", e, EX_DATAERR),
        },
        Command::Status(args) => match rlbd::statusview::main_status(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail("status", &e, e.code),
        },
        Command::Metrics(args) => match rlbd::statusview::main_metrics(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail("metrics", &e, e.code),
        },
        Command::Reload(args) => match rlbd::statusview::main_reload(&args) {
            Ok(done) => {
                println!("rlbd reload: {done}");
                ExitCode::SUCCESS
            }
            Err(e) => fail("reload", &e, e.code),
        },
        Command::Demo(args) => match rlbd::demo::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail("demo", e, 1),
        },
        Command::Completions { shell } => {
            let mut cmd = rlbd::cli::completion_command();
            clap_complete::generate(shell, &mut cmd, "rlbd", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
    }
}
