//! The `[steering]`, `[capture]` and `[observability]` sections: their keys, defaults and ranges.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

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
    /// With `sampling = "auto"`: frames a second one port counts one by one at most (in the
    /// kernel's tc program or from captured frames); past it, one in N.
    pub max_frames_per_sec: u32,
    /// Where IPv4/IPv6 frames are counted: "auto" (in the kernel with eBPF where the kernel
    /// and rlbd's capabilities allow, else from captured frames; `sampling = "off"` keeps
    /// captured frames, every one counted), "kernel" (eBPF; a port that cannot is an error in
    /// the log and counts from captured frames), "packet" (captured frames, as `sampling`
    /// says).
    pub counting: String,
}

/// Where a port's IPv4/IPv6 frames are counted, from `[capture] counting` and `sampling`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelCounting {
    /// From captured frames only.
    Off,
    /// In the kernel where possible (a port that cannot is told at info level).
    Try,
    /// In the kernel (a port that cannot is an error in the log).
    Require,
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
            counting: "auto".into(),
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
                (100..=100_000_000).contains(&self.max_frames_per_sec),
                "is not in 100..=100000000",
            ),
            (
                "counting",
                ["auto", "kernel", "packet"].contains(&self.counting.as_str()),
                "is not \"auto\", \"kernel\" or \"packet\"",
            ),
        ])
    }

    /// Whether ports count in the kernel.
    pub fn kernel_counting(&self) -> KernelCounting {
        match (self.counting.as_str(), self.sampling.as_str()) {
            ("kernel", _) => KernelCounting::Require,
            ("auto", "auto") => KernelCounting::Try,
            _ => KernelCounting::Off,
        }
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

    /// The metrics file of the daemon on bond (or first port) `name`: `{name}` in the path
    /// stands for it, so that one file shared by several instances gives each its own.
    pub fn metrics_file_for(&self, name: &str) -> Option<PathBuf> {
        let p = self.metrics_file.as_ref()?;
        Some(match p.to_str() {
            Some(s) if s.contains("{name}") => PathBuf::from(s.replace("{name}", name)),
            _ => p.clone(),
        })
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
