use clap::Parser;
use rlbd::cli::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::LabSink { listen } => rlbd::lab::traffic::run_sink(&listen).map(|_| ()),
        Command::LabSource { to, seconds } => {
            rlbd::lab::traffic::run_source(&to, seconds).map(|n| println!("{n}"))
        }
        _ => {
            eprintln!("rlbd: not implemented yet");
            std::process::exit(1);
        }
    };
    if let Err(e) = result {
        eprintln!("rlbd: {e}");
        std::process::exit(1);
    }
}
