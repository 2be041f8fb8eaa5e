use clap::Parser;
use rlbd::cli::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Simulate { file } => match rlbd::simulate::main(&file) {
            Ok(()) => Ok(()),
            Err(e) => {
                eprintln!("rlbd simulate: {e}");
                std::process::exit(65); // EX_DATAERR: the scenario is at fault
            }
        },
        Command::Demo(args) => rlbd::lab::demo::run(&args).map_err(std::io::Error::other),
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
