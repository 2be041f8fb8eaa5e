//! Command-line definitions. Kept free of behaviour so the man page can be checked against it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "rlbd",
    version,
    about = "Receive load-balancing daemon for Linux bonded NICs",
    long_about = "rlbd measures each bond slave's receive rate and each client's rate, and when a \
                  slave stays over its threshold it moves chosen clients to the least-loaded slave \
                  by sending them unicast ARP updates that carry that slave's MAC."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The command line that shell completions offer: `Cli` without its hidden subcommands (such as
/// `completions`), which clap_complete would otherwise list.
pub fn completion_command() -> clap::Command {
    let full = <Cli as clap::CommandFactory>::command();
    let mut cmd = clap::Command::new("rlbd").version(env!("CARGO_PKG_VERSION"));
    if let Some(about) = full.get_about() {
        cmd = cmd.about(about.clone());
    }
    cmd.subcommand_required(true)
        .subcommands(full.get_subcommands().filter(|c| !c.is_hide_set()).cloned())
}

#[derive(Debug, Subcommand)]
// Parsed once per process: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Run the daemon in the foreground.
    Run(RunArgs),
    /// Replay a JSON scenario through the daemon's engine on a simulated LAN; print one JSON line
    /// per second.
    Simulate {
        /// Scenario file, or `-` for standard input.
        file: PathBuf,
        /// Print the engine's log records at LEVEL (error, warn, info, debug, trace) and above
        /// to standard error, each with its simulated time: why it moved, or did not.
        #[arg(long, value_name = "LEVEL")]
        log: Option<log::LevelFilter>,
    },
    /// Validate a configuration file and print the effective settings.
    CheckConfig {
        /// Configuration file (default /etc/rlbd/rlbd.toml).
        file: Option<PathBuf>,
        /// Check the file that `rlbd run --bond NAME` reads: /etc/rlbd/NAME.toml, else
        /// /etc/rlbd/rlbd.toml.
        #[arg(long, value_name = "NAME", conflicts_with = "file")]
        bond: Option<String>,
    },
    /// Show a running daemon's ports, clients and totals, asked over its control socket.
    Status(StatusArgs),
    /// Print a running daemon's metrics in the Prometheus text exposition format.
    Metrics(MetricsArgs),
    /// Make a running daemon read its configuration again, and wait for the result: a bad
    /// file exits 78 with the reason (the daemon runs on with its settings).
    Reload(MetricsArgs),
    /// Build a throwaway namespace lab and show rlbd fixing an unbalanced bond (root).
    Demo(DemoArgs),
    /// Print a shell completion script generated from these definitions (packaging/build.sh
    /// writes them into both packages).
    #[command(hide = true)]
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Steer among the slaves of this bond.
    #[arg(long, value_name = "NAME", conflicts_with = "ports")]
    pub bond: Option<String>,
    /// Steer among plain ports that all carry the server's address (comma separated).
    #[arg(long, value_name = "IF,IF", value_delimiter = ',')]
    pub ports: Vec<String>,
    #[command(flatten)]
    pub knobs: crate::config::Overrides,
    /// Decide and log, but send nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Control socket for `rlbd status` and `rlbd metrics` [default: /run/rlbd/NAME.sock, NAME
    /// being the bond or the first port; config key observability.control_socket].
    #[arg(long, value_name = "PATH")]
    pub control_socket: Option<PathBuf>,
    /// Rewrite this file with the metrics (Prometheus text format) every --metrics-interval
    /// seconds [config key observability.metrics_file].
    #[arg(long, value_name = "PATH")]
    pub metrics_file: Option<PathBuf>,
    /// Seconds between rewrites of --metrics-file [default: 10; config key
    /// observability.metrics_interval_secs].
    #[arg(long, value_name = "SECS")]
    pub metrics_interval: Option<u64>,
    /// Where the moves, their hold-downs and the per-client limits outlive a restart
    /// [default: $RUNTIME_DIRECTORY/NAME.state under systemd (/run/rlbd), else none; empty:
    /// none].
    #[arg(long, value_name = "PATH")]
    pub state_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The daemon's bond (or first port): asks /run/rlbd/NAME.sock [default: the only socket
    /// there].
    pub name: Option<String>,
    /// Print the status report as JSON, as the daemon sends it.
    #[arg(long)]
    pub json: bool,
    /// List every client, not only the busiest.
    #[arg(long, conflicts_with = "top")]
    pub all: bool,
    /// Number of clients listed, busiest first.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Redraw once a second until Ctrl-C.
    #[arg(long)]
    pub watch: bool,
    /// Ask this control socket instead of /run/rlbd/NAME.sock.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// The daemon's bond (or first port): asks /run/rlbd/NAME.sock [default: the only socket
    /// there].
    pub name: Option<String>,
    /// Ask this control socket instead of /run/rlbd/NAME.sock.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Per-port cap in Mbit/s applied with tc tbf on each switch port toward the server.
    #[arg(long, default_value_t = 100)]
    pub cap_mbit: u32,
    /// Seconds of traffic without rlbd, then again with it.
    #[arg(long, default_value_t = 10)]
    pub seconds: u32,
    /// Write an SVG chart of per-port receive rate with the moves marked.
    #[arg(long, value_name = "FILE.svg")]
    pub chart: Option<PathBuf>,
}

/// The exit code of a command line clap did not accept: 64 (EX_USAGE) for a mistake, where
/// clap exits 2, and 0 for `--help` and `--version`, which clap reports the same way.
pub fn parse_exit_code(e: &clap::Error) -> u8 {
    if e.use_stderr() {
        crate::exit::EX_USAGE
    } else {
        0
    }
}

/// When `name` looks escaped by systemd (`\x2d` for `-`: the form a unit instance takes, as in
/// `rlbd@bond\x2dsan`), the message that says so and how to enable the instance; `None` for a
/// plain name. The unit passes the bond's own name (`%I`); an escaped one here means it was
/// typed or passed as `%i`, and would name an interface that does not exist.
pub fn escaped_name_error(name: &str) -> Option<String> {
    let plain = systemd_unescape(name)?;
    Some(format!(
        "bond name \"{name}\" looks escaped by systemd-escape; rlbd wants the bond's own name \
         (\"{plain}\"). Under systemd, enable the instance with \
         systemctl enable \"rlbd@$(systemd-escape {plain})\": the unit passes the name unescaped"
    ))
}

/// `name` with its `\xNN` escapes decoded, when it has any.
pub fn systemd_unescape(name: &str) -> Option<String> {
    let b = name.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut found = false;
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 2..i + 4)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (b[i], b.get(i + 1), hex) {
            (b'\\', Some(b'x'), Some(byte)) => {
                out.push(byte);
                found = true;
                i += 4;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    found.then(|| String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(args: &[&str]) -> u8 {
        match <Cli as clap::Parser>::try_parse_from(args) {
            Ok(_) => panic!("{args:?} parsed"),
            Err(e) => parse_exit_code(&e),
        }
    }

    #[test]
    fn command_line_mistakes_are_64_help_and_version_0() {
        for mistake in [
            &["rlbd"][..],
            &["rlbd", "nosuchcommand"],
            &["rlbd", "run", "--nosuchoption"],
            &["rlbd", "status", "--top", "many"],
            &["rlbd", "run", "--bond", "b0", "--ports", "eth0"],
            &["rlbd", "simulate"],
        ] {
            assert_eq!(code_of(mistake), 64, "{mistake:?}");
        }
        for asked in [
            &["rlbd", "--help"][..],
            &["rlbd", "--version"],
            &["rlbd", "run", "--help"],
            &["rlbd", "help", "status"],
        ] {
            assert_eq!(code_of(asked), 0, "{asked:?}");
        }
    }

    #[test]
    fn escaped_names_are_decoded() {
        assert_eq!(
            systemd_unescape(r"bond\x2dsan").as_deref(),
            Some("bond-san")
        );
        assert_eq!(systemd_unescape(r"a\x2db\x2dc").as_deref(), Some("a-b-c"));
        assert_eq!(systemd_unescape(r"bond\x5fx").as_deref(), Some("bond_x"));
        assert_eq!(systemd_unescape(r"bond\x2D1").as_deref(), Some("bond-1"));
    }

    #[test]
    fn plain_names_and_near_misses_are_not_escaped() {
        let near = [r"bond\x2", r"bond\xzz", r"bond\x+1", r"b\y2d", r"\x"];
        for name in ["bond0", "bond-san", "bond_x"].into_iter().chain(near) {
            assert_eq!(systemd_unescape(name), None, "{name}");
            assert_eq!(escaped_name_error(name), None, "{name}");
        }
        // Any \xNN is an escape, even one that does not decode to UTF-8.
        assert_eq!(systemd_unescape(r"b\xff").as_deref(), Some("b\u{fffd}"));
    }

    #[test]
    fn the_error_names_the_bond_and_the_enable_command() {
        let e = escaped_name_error(r"bond\x2dsan").unwrap();
        assert!(
            e.contains(r#"bond name "bond\x2dsan" looks escaped"#),
            "{e}"
        );
        assert!(e.contains(r#"("bond-san")"#), "{e}");
        assert!(
            e.contains(r#"systemctl enable "rlbd@$(systemd-escape bond-san)""#),
            "{e}"
        );
    }
}
