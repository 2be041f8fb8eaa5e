//! `rlbd-lab`: the labs' test tooling — traffic sink and source, the spoofed-source flooder and the
//! kernel lab's chart. Built beside `rlbd` for the tests, benches and QEMU labs; never packaged.
//! The installed `rlbd` carries one small traffic generator of its own: `rlbd demo` runs a TCP
//! bulk sender in-process between namespaces it makes, the README's first command.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "rlbd-lab",
    version,
    about = "Test tooling for rlbd's labs (not installed by the packages)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Accept TCP connections and discard what arrives.
    Sink {
        /// Address to listen on, e.g. 198.18.0.1:5001.
        #[arg(long)]
        listen: String,
    },
    /// Send as fast as TCP allows for a bounded time; prints the bytes sent.
    Source {
        /// Address to connect to, e.g. 198.18.0.1:5001.
        #[arg(long)]
        to: String,
        /// Stop after this many seconds.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
    },
    /// Spoofed-source frame flood for the flood test and the capture benchmark (root).
    Flood(rlbd_lab::flood::FloodArgs),
    /// Chart of a kernel-lab console log: per-port receive rate from its `KLAB-SAMPLE <t>
    /// <name>=<rx_bytes>...` lines, with its `KLAB-MARK <t> <label>` lines marked.
    Chart {
        /// Console log to read; other lines and escape codes are ignored.
        #[arg(long, value_name = "FILE")]
        input: PathBuf,
        /// SVG file to write.
        #[arg(long, value_name = "FILE.svg")]
        output: PathBuf,
        /// Chart title.
        #[arg(long, value_name = "T")]
        title: Option<String>,
        /// Per-port cap in Mbit/s, drawn as a dashed line (0: none known).
        #[arg(long, value_name = "MBIT", default_value_t = 0.0)]
        cap: f64,
    },
}

fn done<T: std::fmt::Display, E: std::fmt::Display>(what: &str, r: Result<T, E>) -> ExitCode {
    match r {
        Ok(out) => {
            println!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rlbd-lab {what}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    use rlbd_lab::{flood, labchart, traffic};
    match Cli::parse().command {
        Command::Sink { listen } => match traffic::run_sink(&listen, None) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => done::<u8, _>("sink", Err(e)),
        },
        Command::Source { to, seconds } => done("source", traffic::run_source(&to, seconds)),
        Command::Flood(args) => done("flood", flood::run(&args).map(|r| r.to_line())),
        Command::Chart {
            input,
            output,
            title,
            cap,
        } => done(
            "chart",
            labchart::run(&input, &output, title.as_deref(), cap),
        ),
    }
}
