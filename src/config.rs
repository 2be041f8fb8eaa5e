//! The configuration file (`/etc/rlbd/rlbd.toml`, TOML) merged with command-line overrides into
//! one validated `Settings`. Errors name the key and, where the file has it, the line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::policy::PolicyConfig;

pub const DEFAULT_CONFIG_PATH: &str = "/etc/rlbd/rlbd.toml";

/// Times each update is sent: once at once, then repeated, since a single frame can be lost.
pub const DEFAULT_REPEATS: u32 = 3;
pub const DEFAULT_REPEAT_INTERVAL_MS: u64 = 250;
/// Updates one client may be sent per second, counting repeats and re-assertions.
pub const DEFAULT_PER_CLIENT_PER_SEC: u32 = 8;
/// Updates sent per second in total: a flood of re-assertions must never become a storm.
pub const DEFAULT_TOTAL_PER_SEC: u32 = 1000;
/// Delay before a re-assertion, so it lands after the kernel's frame that it corrects.
pub const DEFAULT_REASSERT_DELAY_MS: u64 = 20;
/// Ports mode: seconds between learning frames, well inside a bridge's 300 s ageing time.
pub const DEFAULT_LEARNING_INTERVAL_SECS: u64 = 1;
pub const DEFAULT_TABLE_SIZE: usize = 4096;
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 60;
pub const DEFAULT_RING_BLOCKS: u32 = 8;
pub const DEFAULT_RING_BLOCK_KIB: u32 = 1024;
/// Seconds between rewrites of the metrics file.
pub const DEFAULT_METRICS_INTERVAL_SECS: u64 = 10;
/// Longest Unix socket path (`sun_path` is 108 bytes with its terminating NUL).
const MAX_SOCKET_PATH: usize = 107;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SteeringConfig {
    pub repeats: u32,
    pub repeat_interval_ms: u64,
    pub per_client_per_sec: u32,
    pub total_per_sec: u32,
    pub reassert_delay_ms: u64,
    pub learning_interval_secs: u64,
}

impl Default for SteeringConfig {
    fn default() -> Self {
        Self {
            repeats: DEFAULT_REPEATS,
            repeat_interval_ms: DEFAULT_REPEAT_INTERVAL_MS,
            per_client_per_sec: DEFAULT_PER_CLIENT_PER_SEC,
            total_per_sec: DEFAULT_TOTAL_PER_SEC,
            reassert_delay_ms: DEFAULT_REASSERT_DELAY_MS,
            learning_interval_secs: DEFAULT_LEARNING_INTERVAL_SECS,
        }
    }
}

/// `Err((key, what is wrong))` for the first value out of its range.
fn check_ranges(checks: &[(&'static str, bool, &str)]) -> Result<(), (&'static str, String)> {
    match checks.iter().find(|(_, ok, _)| !ok) {
        Some((key, _, why)) => Err((key, why.to_string())),
        None => Ok(()),
    }
}

impl SteeringConfig {
    /// The first bad field as (key, message).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        check_ranges(&[
            (
                "repeats",
                (1..=10).contains(&self.repeats),
                "is not in 1..=10",
            ),
            (
                "repeat_interval_ms",
                (10..=10_000).contains(&self.repeat_interval_ms),
                "is not in 10..=10000",
            ),
            (
                "per_client_per_sec",
                (1..=100).contains(&self.per_client_per_sec),
                "is not in 1..=100",
            ),
            (
                "total_per_sec",
                (1..=100_000).contains(&self.total_per_sec),
                "is not in 1..=100000",
            ),
            (
                "reassert_delay_ms",
                self.reassert_delay_ms <= 90,
                "is more than 90 (re-assertion must land within 100 ms)",
            ),
            (
                "learning_interval_secs",
                (1..=60).contains(&self.learning_interval_secs),
                "is not in 1..=60",
            ),
        ])
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CaptureConfig {
    /// Clients tracked at most; the least recently seen is evicted past it.
    pub table_size: usize,
    /// Seconds after which a silent client is forgotten.
    pub idle_timeout_secs: u64,
    pub ring_blocks: u32,
    pub ring_block_kib: u32,
    /// "auto": a busy port is sampled in the kernel (one IPv4/IPv6 frame in N, N from its packet
    /// rate); "off": every frame is counted.
    pub sampling: String,
    /// With `sampling = "auto"`: frames a second one port hands rlbd at most.
    pub max_frames_per_sec: u32,
}

impl Default for CaptureConfig {
    fn default() -> Self {
        Self {
            table_size: DEFAULT_TABLE_SIZE,
            idle_timeout_secs: DEFAULT_IDLE_TIMEOUT_SECS,
            ring_blocks: DEFAULT_RING_BLOCKS,
            ring_block_kib: DEFAULT_RING_BLOCK_KIB,
            sampling: "auto".into(),
            max_frames_per_sec: crate::capture::sampling::DEFAULT_MAX_FRAMES_PER_SEC,
        }
    }
}

impl CaptureConfig {
    /// The first bad field as (key, message).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        check_ranges(&[
            (
                "table_size",
                (16..=(1 << 24)).contains(&self.table_size),
                "is not in 16..=16777216",
            ),
            (
                "idle_timeout_secs",
                (2..=86_400).contains(&self.idle_timeout_secs),
                "is not in 2..=86400",
            ),
            (
                "ring_blocks",
                (2..=1024).contains(&self.ring_blocks),
                "is not in 2..=1024",
            ),
            (
                "ring_block_kib",
                (4..=65_536).contains(&self.ring_block_kib) && self.ring_block_kib % 4 == 0,
                "is not a multiple of 4 in 4..=65536",
            ),
            (
                "sampling",
                ["auto", "off"].contains(&self.sampling.as_str()),
                "is not \"auto\" or \"off\"",
            ),
            (
                "max_frames_per_sec",
                (1000..=100_000_000).contains(&self.max_frames_per_sec),
                "is not in 1000..=100000000",
            ),
        ])
    }

    /// The frames a second a port may hand over before it is sampled; `None` with sampling off.
    pub fn sampling_limit(&self) -> Option<u32> {
        (self.sampling == "auto").then_some(self.max_frames_per_sec)
    }
}

/// `[observability]`: the control socket and the metrics file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ObservabilityConfig {
    /// Control socket; absent means `/run/rlbd/NAME.sock`, empty means none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_socket: Option<PathBuf>,
    /// File rewritten with the metrics every `metrics_interval_secs`; absent means none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_file: Option<PathBuf>,
    pub metrics_interval_secs: u64,
}

impl Default for ObservabilityConfig {
    fn default() -> Self {
        Self {
            control_socket: None,
            metrics_file: None,
            metrics_interval_secs: DEFAULT_METRICS_INTERVAL_SECS,
        }
    }
}

impl ObservabilityConfig {
    /// The first bad field as (key, message).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if let Some(p) = &self.control_socket {
            let len = p.as_os_str().len();
            if len > 0 && !p.is_absolute() {
                return Err((
                    "control_socket",
                    format!("{} is not an absolute path (or \"\" for none)", p.display()),
                ));
            }
            if len > MAX_SOCKET_PATH {
                return Err((
                    "control_socket",
                    format!(
                        "{} is longer than {MAX_SOCKET_PATH} bytes, the limit for a Unix socket",
                        p.display()
                    ),
                ));
            }
        }
        if let Some(p) = &self.metrics_file {
            if p.file_name().is_none() || p.as_os_str().as_encoded_bytes().ends_with(b"/") {
                return Err((
                    "metrics_file",
                    format!("{:?} does not name a file", p.display().to_string()),
                ));
            }
        }
        if !(1..=86_400).contains(&self.metrics_interval_secs) {
            return Err(("metrics_interval_secs", "is not in 1..=86400".into()));
        }
        Ok(())
    }

    /// The control socket for the bond or first port `name`, or `None` when disabled.
    pub fn control_socket_for(&self, name: &str) -> Option<PathBuf> {
        match &self.control_socket {
            Some(p) if p.as_os_str().is_empty() => None,
            Some(p) => Some(p.clone()),
            None => Some(crate::protocol::default_socket(name)),
        }
    }
}

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
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Bond(String),
    Ports(Vec<String>),
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
    pub config_path: Option<PathBuf>,
}

pub use crate::policy::ConfigError;

const LOG_LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// Line (1-based) where `key` is first assigned in `text`, for messages about valid TOML with a
/// bad value.
fn line_of(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            l.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|i| i + 1)
}

fn at(
    path: &Path,
    text: &str,
    key: &str,
    full_key: &str,
    msg: impl std::fmt::Display,
) -> ConfigError {
    let place = match line_of(text, key) {
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
    let file: FileConfig = toml::from_str(text).map_err(|e| {
        // toml's message already names the key and shows the line; keep it on one line.
        let msg = e.message().to_string();
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        match line {
            Some(l) => ConfigError::file(format!("{}:{l}", path.display()), msg),
            None => ConfigError::file(path.display().to_string(), msg),
        }
    })?;
    file.policy
        .validate()
        .map_err(|e| at(path, text, &e.key, &format!("policy.{}", e.key), &e.message))?;
    validate_sections(&file).map_err(|(key, full, msg)| at(path, text, key, &full, msg))?;
    Ok(file)
}

type FieldError = (&'static str, String, String);

fn validate_sections(f: &FileConfig) -> Result<(), FieldError> {
    for (name, mbit) in &f.capacity {
        if !(mbit.is_finite() && *mbit > 0.0) {
            return Err((
                "",
                format!("capacity.{name}"),
                format!("{mbit} is not a positive Mbit/s"),
            ));
        }
    }
    if let Some(level) = &f.log_level {
        if !LOG_LEVELS.contains(&level.as_str()) {
            return Err((
                "log_level",
                "log_level".into(),
                format!("{level:?} is not one of {LOG_LEVELS:?}"),
            ));
        }
    }
    if let Some(ports) = &f.ports {
        if f.bond.is_some() && !ports.is_empty() {
            return Err((
                "ports",
                "ports".into(),
                "give either bond or ports, not both".into(),
            ));
        }
    }
    let section = |name: &str, r: Result<(), (&'static str, String)>| {
        r.map_err(|(key, msg)| (key, format!("{name}.{key}"), msg))
    };
    section("steering", f.steering.validate())?;
    section("capture", f.capture.validate())?;
    section("observability", f.observability.validate())?;
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
    if name.is_empty() || !(mbit.is_finite() && mbit > 0.0) {
        return Err(bad());
    }
    Ok((name.to_string(), mbit))
}

/// The command line's settings that override the file's (`rlbd run` and `rlbd check-config`
/// fill it from their flags). Plain data, so the configuration does not depend on the CLI.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// The file to read instead of the default ones.
    pub config: Option<PathBuf>,
    /// `IF=MBIT` strings, as given.
    pub capacity: Vec<String>,
    pub threshold: Option<f64>,
    pub window: Option<usize>,
    pub hits: Option<usize>,
    pub min_rate: Option<f64>,
    pub hold_down: Option<u64>,
    /// Log levels above (verbose) or below (quiet) the configured one.
    pub verbose: u8,
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
        };
        toml::to_string(&f).unwrap_or_else(|e| format!("# cannot render: {e}\n"))
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
