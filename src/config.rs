//! The configuration file (`/etc/rlbd/rlbd.toml`, TOML) merged with command-line overrides into
//! one validated `Settings`. Errors name the key and, where the file has it, the line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::guests::GuestsConfig;
use crate::policy::PolicyConfig;

pub const DEFAULT_CONFIG_PATH: &str = "/etc/rlbd/rlbd.toml";

mod clients;
mod errors;
mod sections;

pub use clients::{pin_key, ClientMark, ClientMatch, ClientRules, ClientsConfig, MarkRef};

pub use sections::{
    CaptureConfig, KernelCounting, ObservabilityConfig, SteeringConfig, DEFAULT_IDLE_TIMEOUT_SECS,
    DEFAULT_LEARNING_INTERVAL_SECS, DEFAULT_METRICS_INTERVAL_SECS, DEFAULT_PER_CLIENT_PER_SEC,
    DEFAULT_REASSERT_DELAY_MS, DEFAULT_REPEATS, DEFAULT_REPEAT_INTERVAL_MS, DEFAULT_RING_BLOCKS,
    DEFAULT_RING_BLOCK_KIB, DEFAULT_TABLE_SIZE, DEFAULT_TOTAL_PER_SEC,
};

/// The file as written. Every section is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub bond: Option<String>,
    pub ports: Option<Vec<String>>,
    pub log_level: Option<String>,
    pub dry_run: Option<bool>,
    #[serde(default)]
    pub policy: PolicyConfig,
    /// Per-port capacity in Mbit/s, overriding the link's reported speed.
    #[serde(default)]
    pub capacity: BTreeMap<String, f64>,
    #[serde(default)]
    pub steering: SteeringConfig,
    #[serde(default)]
    pub capture: CaptureConfig,
    #[serde(default)]
    pub observability: ObservabilityConfig,
    #[serde(default)]
    pub guests: GuestsConfig,
    /// Clients never moved, and clients kept on a port.
    #[serde(default)]
    pub clients: ClientsConfig,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Bond(String),
    Ports(Vec<String>),
}

impl Target {
    /// The instance's name: the bond, or in ports mode the first port (the name of the control
    /// socket, the metrics' `bond` label and the journal's `RLBD_BOND`).
    pub fn instance(&self) -> &str {
        match self {
            Target::Bond(b) => b,
            Target::Ports(p) => p.first().map_or("", String::as_str),
        }
    }
}

/// The effective settings: file, then command line on top, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub target: Option<Target>,
    pub log_level: String,
    pub dry_run: bool,
    pub policy: PolicyConfig,
    pub capacity_mbps: BTreeMap<String, f64>,
    pub steering: SteeringConfig,
    pub capture: CaptureConfig,
    pub observability: ObservabilityConfig,
    pub guests: GuestsConfig,
    pub clients: ClientsConfig,
    pub config_path: Option<PathBuf>,
}

pub use crate::policy::ConfigError;

impl Settings {
    /// Settings for `target` from no file: every section at its default, log level info. What
    /// `rlbd simulate` and the tests start from, setting only what they need.
    pub fn for_target(target: Target) -> Settings {
        Settings {
            target: Some(target),
            log_level: "info".into(),
            dry_run: false,
            policy: Default::default(),
            capacity_mbps: BTreeMap::new(),
            steering: Default::default(),
            capture: Default::default(),
            observability: Default::default(),
            guests: Default::default(),
            clients: Default::default(),
            config_path: None,
        }
    }
}

const LOG_LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// An error about `full_key` (`policy.threshold`, `capacity.eth0`, `log_level`) set in `text`,
/// placed at the line that sets it.
fn at(path: &Path, text: &str, full_key: &str, msg: impl std::fmt::Display) -> ConfigError {
    let (section, key) = match full_key.split_once('.') {
        Some((s, k)) => (Some(s), k),
        None => (None, full_key),
    };
    let place = match errors::line_of(text, section, key) {
        Some(line) => format!("{}:{line}", path.display()),
        None => path.display().to_string(),
    };
    ConfigError {
        place: Some(place),
        key: full_key.to_string(),
        message: msg.to_string(),
    }
}

pub fn parse_file(path: &Path, text: &str) -> Result<FileConfig, ConfigError> {
    let mut file: FileConfig =
        toml::from_str(text).map_err(|e| errors::from_toml(path, text, &e))?;
    file.policy
        .validate()
        .map_err(|e| at(path, text, &format!("policy.{}", e.key), &e.message))?;
    validate_sections(&file).map_err(|(full, msg)| at(path, text, &full, msg))?;
    file.clients.note_places(path, text);
    if let Err((key, msg)) = file.clients.validate() {
        return Err(ConfigError {
            place: Some(clients_place(&file.clients, path, &key)),
            key,
            message: msg,
        });
    }
    Ok(file)
}

/// `file:line` of the `[clients]` entry that `key` (`clients.exclude`, `clients.pin."X"`) is
/// about: the first exclude entry that does not parse, or the pin entry named.
fn clients_place(c: &ClientsConfig, path: &Path, key: &str) -> String {
    let place = match key.strip_prefix("clients.pin.") {
        Some(q) => c.place_of(q.trim_matches('"'), true),
        None => c
            .exclude
            .iter()
            .find(|e| ClientMatch::parse(e).is_err())
            .and_then(|e| c.place_of(e, false)),
    };
    place.cloned().unwrap_or_else(|| path.display().to_string())
}

/// (full key, what is wrong).
type FieldError = (String, String);

/// Why `name` can never be a Linux interface's name, as the kernel's `dev_valid_name` judges
/// it: empty, longer than 15 bytes, `.` or `..`, or holding `/`, `:` or whitespace. The name
/// also becomes a path (`/etc/rlbd/NAME.toml`, `/run/rlbd/NAME.sock`), so this is checked before
/// any file is opened, and a typo is a configuration error (exit 78), not a missing link.
pub fn interface_name_error(name: &str) -> Option<String> {
    let why = if name.is_empty() {
        "an empty interface name"
    } else if name.len() > 15 {
        "longer than an interface name may be (15 bytes)"
    } else if name == "." || name == ".." {
        "not an interface name"
    } else if name.contains(['/', ':']) || name.chars().any(char::is_whitespace) {
        "not an interface name (no '/', ':' or whitespace)"
    } else {
        return None;
    };
    Some(format!("{name:?} is {why}"))
}

/// The bond or ports as `key` (`bond`, `ports`, `--bond`) gives them, checked as interface
/// names.
fn validate_target(key: &str, target: &Target) -> Result<(), FieldError> {
    let names = match target {
        Target::Bond(b) => std::slice::from_ref(b),
        Target::Ports(p) => p.as_slice(),
    };
    match names.iter().find_map(|n| interface_name_error(n)) {
        Some(why) => Err((key.to_string(), why)),
        None => Ok(()),
    }
}

fn validate_sections(f: &FileConfig) -> Result<(), FieldError> {
    if let Some(b) = &f.bond {
        validate_target("bond", &Target::Bond(b.clone()))?;
    }
    if let Some(p) = &f.ports {
        validate_target("ports", &Target::Ports(p.clone()))?;
    }
    for (name, mbit) in &f.capacity {
        if let Some(why) = interface_name_error(name) {
            return Err((format!("capacity.{name}"), why));
        }
        if !(mbit.is_finite() && *mbit > 0.0) {
            return Err((
                format!("capacity.{name}"),
                format!("{mbit} is not a positive Mbit/s"),
            ));
        }
    }
    if let Some(level) = &f.log_level {
        if !LOG_LEVELS.contains(&level.as_str()) {
            return Err((
                "log_level".into(),
                format!("{level:?} is not one of {LOG_LEVELS:?}"),
            ));
        }
    }
    if let Some(ports) = &f.ports {
        if f.bond.is_some() && !ports.is_empty() {
            return Err(("ports".into(), "give either bond or ports, not both".into()));
        }
    }
    let section = |name: &str, r: Result<(), (&'static str, String)>| {
        r.map_err(|(key, msg)| (format!("{name}.{key}"), msg))
    };
    section("steering", f.steering.validate())?;
    section("capture", f.capture.validate())?;
    section("observability", f.observability.validate())?;
    section("guests", f.guests.validate())?;
    Ok(())
}

/// The files tried, in order, when no `--config` is given: the bond's own file, so one host can
/// run an instance per bond (`rlbd@bond0`), then the shared one.
pub fn default_paths(target: Option<&Target>) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(Target::Bond(b)) = target {
        if !b.is_empty() && !b.contains('/') && !b.starts_with('.') {
            v.push(PathBuf::from(format!("/etc/rlbd/{b}.toml")));
        }
    }
    v.push(PathBuf::from(DEFAULT_CONFIG_PATH));
    v
}

/// Reads the file: an explicit one must exist; of the default ones the first present is used,
/// and none present means built-in defaults.
pub fn load_file(
    path: Option<&Path>,
    target: Option<&Target>,
) -> Result<(FileConfig, Option<PathBuf>), ConfigError> {
    if let Some(t) = target {
        let key = match t {
            Target::Bond(_) => "--bond",
            Target::Ports(_) => "--ports",
        };
        validate_target(key, t).map_err(|(key, why)| ConfigError::key(key, why))?;
    }
    let (candidates, explicit) = match path {
        Some(p) => (vec![p.to_path_buf()], true),
        None => (default_paths(target), false),
    };
    for path in candidates {
        match std::fs::read_to_string(&path) {
            Ok(text) => return Ok((parse_file(&path, &text)?, Some(path))),
            Err(e) if !explicit && e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(ConfigError::file(
                    path.display().to_string(),
                    format!("cannot read: {e}"),
                ))
            }
        }
    }
    Ok((FileConfig::default(), None))
}

/// `IF=MBIT` from `--capacity`.
fn parse_capacity(arg: &str) -> Result<(String, f64), ConfigError> {
    let bad = || {
        ConfigError::key(
            "--capacity",
            format!("{arg:?}: expected IF=MBIT, e.g. eth0=1000"),
        )
    };
    let (name, mbit) = arg.split_once('=').ok_or_else(bad)?;
    let mbit: f64 = mbit.trim().parse().map_err(|_| bad())?;
    if !(mbit.is_finite() && mbit > 0.0) {
        return Err(bad());
    }
    if let Some(why) = interface_name_error(name) {
        return Err(ConfigError::key("--capacity", why));
    }
    Ok((name.to_string(), mbit))
}

/// The command line's settings that override the file's: the flags shared by every command
/// that runs the algorithm, parsed straight into it (one type for the concept).
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct Overrides {
    /// Configuration file [default: /etc/rlbd/BOND.toml with --bond, else /etc/rlbd/rlbd.toml;
    /// an absent default file means built-in defaults]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Capacity of a port in Mbit/s, overriding the link's reported speed (repeatable).
    #[arg(long, value_name = "IF=MBIT")]
    pub capacity: Vec<String>,
    /// Overload threshold as a fraction of capacity, in (0, 1].
    #[arg(long, value_name = "FRACTION")]
    pub threshold: Option<f64>,
    /// Number of one-second samples in the overload window.
    #[arg(long, value_name = "SAMPLES")]
    pub window: Option<usize>,
    /// Samples over threshold within the window that make a port overloaded.
    #[arg(long, value_name = "SAMPLES")]
    pub hits: Option<usize>,
    /// Clients below this rate (kilobytes per second) are never moved.
    #[arg(long, value_name = "KB_PER_S")]
    pub min_rate: Option<f64>,
    /// Seconds a moved client stays where it was put before it may move again.
    #[arg(long, value_name = "SECONDS")]
    pub hold_down: Option<u64>,
    /// More log output (repeatable).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Less log output (repeatable).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub quiet: u8,
}

/// File first, command line on top; `target` comes from the command line when it names one.
pub fn resolve(
    knobs: &Overrides,
    cli_target: Option<Target>,
    cli_dry_run: bool,
) -> Result<Settings, ConfigError> {
    let (file, config_path) = load_file(knobs.config.as_deref(), cli_target.as_ref())?;
    let mut policy = file.policy.clone();
    if let Some(v) = knobs.threshold {
        policy.threshold = v;
    }
    if let Some(v) = knobs.window {
        policy.window = v;
    }
    if let Some(v) = knobs.hits {
        policy.hits = v;
    }
    if let Some(v) = knobs.min_rate {
        policy.min_rate = v;
    }
    if let Some(v) = knobs.hold_down {
        policy.hold_down = v;
    }
    policy
        .validate()
        .map_err(|e| ConfigError::key(format!("--{}", e.key.replace('_', "-")), e.message))?;
    let mut capacity_mbps = file.capacity.clone();
    for arg in &knobs.capacity {
        let (name, mbit) = parse_capacity(arg)?;
        capacity_mbps.insert(name, mbit);
    }
    let target = match cli_target {
        Some(t) => Some(t),
        None => match (&file.bond, &file.ports) {
            (Some(b), _) => Some(Target::Bond(b.clone())),
            (None, Some(p)) if !p.is_empty() => Some(Target::Ports(p.clone())),
            _ => None,
        },
    };
    let base = file.log_level.clone().unwrap_or_else(|| "info".into());
    let idx = LOG_LEVELS.iter().position(|l| *l == base).unwrap_or(3) as i32;
    let idx = (idx + i32::from(knobs.verbose) - i32::from(knobs.quiet)).clamp(0, 5) as usize;
    Ok(Settings {
        target,
        log_level: LOG_LEVELS[idx].to_string(),
        dry_run: cli_dry_run || file.dry_run.unwrap_or(false),
        policy,
        capacity_mbps,
        steering: file.steering,
        capture: file.capture,
        observability: file.observability,
        guests: file.guests,
        clients: file.clients,
        config_path,
    })
}

impl Settings {
    /// `rlbd run`'s `--control-socket`, `--metrics-file` and `--metrics-interval` on top of the
    /// file's `[observability]`, validated.
    pub fn override_observability(
        &mut self,
        control_socket: Option<PathBuf>,
        metrics_file: Option<PathBuf>,
        metrics_interval_secs: Option<u64>,
    ) -> Result<(), ConfigError> {
        let mut o = self.observability.clone();
        if control_socket.is_some() {
            o.control_socket = control_socket;
        }
        if metrics_file.is_some() {
            o.metrics_file = metrics_file;
        }
        if let Some(v) = metrics_interval_secs {
            o.metrics_interval_secs = v;
        }
        o.validate().map_err(|(key, msg)| {
            let flag = match key {
                "metrics_interval_secs" => "metrics-interval",
                other => &other.replace('_', "-"),
            };
            ConfigError::key(format!("--{flag}"), msg)
        })?;
        self.observability = o;
        Ok(())
    }
}

impl Settings {
    /// The effective settings as TOML, for `rlbd check-config`.
    pub fn to_toml(&self) -> String {
        let (bond, ports) = match &self.target {
            Some(Target::Bond(b)) => (Some(b.clone()), None),
            Some(Target::Ports(p)) => (None, Some(p.clone())),
            None => (None, None),
        };
        let f = FileConfig {
            bond,
            ports,
            log_level: Some(self.log_level.clone()),
            dry_run: Some(self.dry_run),
            policy: self.policy.clone(),
            capacity: self.capacity_mbps.clone(),
            steering: self.steering.clone(),
            capture: self.capture.clone(),
            observability: self.observability.clone(),
            guests: self.guests.clone(),
            clients: self.clients.clone(),
        };
        toml::to_string(&f).unwrap_or_else(|e| format!("# cannot render: {e}\n"))
    }
}

#[cfg(test)]
mod tests;
