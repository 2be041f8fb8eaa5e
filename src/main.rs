use clap::Parser;
use rlbd::cli::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    match cli.command {
        _ => {
            eprintln!("rlbd: not implemented yet");
            std::process::exit(1);
        }
    }
}
