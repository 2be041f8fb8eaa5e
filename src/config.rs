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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CaptureConfig {
    /// Clients tracked at most; the least recently seen is evicted past it.
    pub table_size: usize,
    /// Seconds after which a silent client is forgotten.
    pub idle_timeout_secs: u64,
    pub ring_blocks: u32,
    pub ring_block_kib: u32,
}

impl Default for CaptureConfig {
    fn default() -> Self {
        Self {
            table_size: DEFAULT_TABLE_SIZE,
            idle_timeout_secs: DEFAULT_IDLE_TIMEOUT_SECS,
            ring_blocks: DEFAULT_RING_BLOCKS,
            ring_block_kib: DEFAULT_RING_BLOCK_KIB,
        }
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
    let s = &f.steering;
    let checks: [(&'static str, bool, &str); 5] = [
        ("repeats", (1..=10).contains(&s.repeats), "is not in 1..=10"),
        (
            "repeat_interval_ms",
            (10..=10_000).contains(&s.repeat_interval_ms),
            "is not in 10..=10000",
        ),
        (
            "per_client_per_sec",
            (1..=100).contains(&s.per_client_per_sec),
            "is not in 1..=100",
        ),
        (
            "total_per_sec",
            (1..=100_000).contains(&s.total_per_sec),
            "is not in 1..=100000",
        ),
        (
            "learning_interval_secs",
            (1..=60).contains(&s.learning_interval_secs),
            "is not in 1..=60",
        ),
    ];
    for (key, ok, why) in checks {
        if !ok {
            return Err((key, format!("steering.{key}"), why.to_string()));
        }
    }
    if s.reassert_delay_ms > 90 {
        return Err((
            "reassert_delay_ms",
            "steering.reassert_delay_ms".into(),
            "is more than 90 (re-assertion must land within 100 ms)".into(),
        ));
    }
    let c = &f.capture;
    if !(16..=(1 << 24)).contains(&c.table_size) {
        return Err((
            "table_size",
            "capture.table_size".into(),
            "is not in 16..=16777216".into(),
        ));
    }
    if !(2..=86_400).contains(&c.idle_timeout_secs) {
        return Err((
            "idle_timeout_secs",
            "capture.idle_timeout_secs".into(),
            "is not in 2..=86400".into(),
        ));
    }
    if !(2..=1024).contains(&c.ring_blocks) {
        return Err((
            "ring_blocks",
            "capture.ring_blocks".into(),
            "is not in 2..=1024".into(),
        ));
    }
    if !(4..=65_536).contains(&c.ring_block_kib) || c.ring_block_kib % 4 != 0 {
        return Err((
            "ring_block_kib",
            "capture.ring_block_kib".into(),
            "is not a multiple of 4 in 4..=65536".into(),
        ));
    }
    f.observability
        .validate()
        .map_err(|(key, msg)| (key, format!("observability.{key}"), msg))?;
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
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<FileConfig, ConfigError> {
        parse_file(Path::new("rlbd.toml"), text)
    }

    #[test]
    fn empty_file_is_all_defaults() {
        let f = parse("").unwrap();
        assert_eq!(f.policy, PolicyConfig::default());
        assert_eq!(f.steering, SteeringConfig::default());
    }

    #[test]
    fn full_file_parses() {
        let f = parse(
            "bond = \"bond0\"\nlog_level = \"debug\"\n[policy]\nthreshold = 0.7\nhold_down = 10\n\
             [capacity]\neth0 = 1000\n[steering]\nrepeats = 2\n[capture]\ntable_size = 65536\n",
        )
        .unwrap();
        assert_eq!(f.bond.as_deref(), Some("bond0"));
        assert_eq!(f.policy.threshold, 0.7);
        assert_eq!(f.capacity["eth0"], 1000.0);
        assert_eq!(f.capture.table_size, 65536);
    }

    #[test]
    fn unknown_key_is_named_with_its_line() {
        let e = parse("bond = \"bond0\"\n[policy]\nthreshhold = 0.7\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("threshhold") && e.contains("rlbd.toml:3"), "{e}");
    }

    #[test]
    fn out_of_range_value_is_named_with_its_line() {
        let e = parse("\n[policy]\nthreshold = 1.5\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("policy.threshold") && e.contains("rlbd.toml:3"),
            "{e}"
        );
        let e = parse("[steering]\nrepeats = 0\n").unwrap_err().to_string();
        assert!(e.contains("steering.repeats") && e.contains(":2"), "{e}");
        let e = parse("[capacity]\neth0 = -1\n").unwrap_err().to_string();
        assert!(e.contains("capacity.eth0"), "{e}");
        let e = parse("log_level = \"loud\"\n").unwrap_err().to_string();
        assert!(e.contains("log_level"), "{e}");
    }

    #[test]
    fn wrong_type_is_reported() {
        let e = parse("[policy]\nwindow = \"three\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("rlbd.toml:2"), "{e}");
    }

    #[test]
    fn command_line_overrides_file_and_is_validated() {
        let dir = std::env::temp_dir().join(format!("rlbd-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.toml");
        std::fs::write(
            &path,
            "ports = [\"p0\", \"p1\"]\n[policy]\nthreshold = 0.7\n[capacity]\np0 = 10\n",
        )
        .unwrap();
        let knobs = Overrides {
            config: Some(path.clone()),
            capacity: vec!["p0=100".into()],
            hits: Some(3),
            verbose: 1,
            ..Default::default()
        };
        let s = resolve(&knobs, None, false).unwrap();
        assert_eq!(
            s.target,
            Some(Target::Ports(vec!["p0".into(), "p1".into()]))
        );
        assert_eq!(s.policy.threshold, 0.7);
        assert_eq!(s.policy.hits, 3);
        assert_eq!(s.capacity_mbps["p0"], 100.0);
        assert_eq!(s.log_level, "debug");
        let bad = Overrides {
            config: Some(path.clone()),
            hits: Some(9),
            ..Default::default()
        };
        assert!(resolve(&bad, None, false)
            .unwrap_err()
            .to_string()
            .contains("--hits"));
        let bad = Overrides {
            config: Some(path),
            capacity: vec!["p0".into()],
            ..Default::default()
        };
        assert!(resolve(&bad, None, false)
            .unwrap_err()
            .to_string()
            .contains("--capacity"));
        let missing = Overrides {
            config: Some(dir.join("nope.toml")),
            ..Default::default()
        };
        assert!(resolve(&missing, None, false)
            .unwrap_err()
            .to_string()
            .contains("nope.toml"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn observability_section_is_validated_and_overridable() {
        let f = parse(
            "[observability]\ncontrol_socket = \"/tmp/x.sock\"\nmetrics_file = \"/run/rlbd/bond0.prom\"\n\
             metrics_interval_secs = 5\n",
        )
        .unwrap();
        assert_eq!(f.observability.metrics_interval_secs, 5);
        assert_eq!(
            f.observability.control_socket_for("bond0"),
            Some(PathBuf::from("/tmp/x.sock"))
        );
        assert_eq!(
            ObservabilityConfig::default().control_socket_for("bond0"),
            Some(PathBuf::from("/run/rlbd/bond0.sock"))
        );
        let off = parse("[observability]\ncontrol_socket = \"\"\n").unwrap();
        assert_eq!(off.observability.control_socket_for("bond0"), None);
        let e = parse("[observability]\n\nmetrics_interval_secs = 0\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("observability.metrics_interval_secs") && e.contains(":3"),
            "{e}"
        );
        let e = parse("[observability]\ncontrol_socket = \"rel.sock\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("observability.control_socket"), "{e}");
        let long = format!("/{}", "a".repeat(120));
        let e = parse(&format!("[observability]\ncontrol_socket = \"{long}\"\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("107 bytes"), "{e}");
        let e = parse("[observability]\nmetrics_file = \"/var/lib/\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("observability.metrics_file"), "{e}");
        assert!(parse("[observability]\nmetrics = 1\n").is_err());

        let mut s = resolve(
            &Overrides {
                config: Some("/dev/null".into()),
                ..Default::default()
            },
            Some(Target::Bond("bond0".into())),
            false,
        )
        .unwrap();
        assert_eq!(s.observability, ObservabilityConfig::default());
        s.override_observability(Some("/tmp/c.sock".into()), None, Some(2))
            .unwrap();
        assert_eq!(s.observability.metrics_interval_secs, 2);
        assert_eq!(
            s.observability.control_socket,
            Some(PathBuf::from("/tmp/c.sock"))
        );
        let e = s
            .override_observability(None, None, Some(0))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--metrics-interval"), "{e}");
        let again = parse(&s.to_toml()).unwrap();
        assert_eq!(
            again.observability.control_socket,
            s.observability.control_socket
        );
    }

    #[test]
    fn a_bond_reads_its_own_file_first() {
        let t = Target::Bond("bond0".into());
        assert_eq!(
            default_paths(Some(&t)),
            vec![
                PathBuf::from("/etc/rlbd/bond0.toml"),
                PathBuf::from(DEFAULT_CONFIG_PATH)
            ]
        );
        assert_eq!(
            default_paths(Some(&Target::Bond("../x".into()))),
            vec![PathBuf::from(DEFAULT_CONFIG_PATH)]
        );
        assert_eq!(
            default_paths(None),
            vec![PathBuf::from(DEFAULT_CONFIG_PATH)]
        );
    }

    #[test]
    fn effective_settings_round_trip_as_toml() {
        let s = resolve(
            &Overrides {
                config: Some("/dev/null".into()),
                ..Default::default()
            },
            Some(Target::Bond("bond0".into())),
            false,
        )
        .unwrap();
        let again = parse(&s.to_toml()).unwrap();
        assert_eq!(again.bond.as_deref(), Some("bond0"));
        assert_eq!(again.policy, s.policy);
    }
}
