//! The daemon's state as plain data: what `rlbd status --json` prints and what the metrics are
//! made from. The schema is stable: fields are only ever added (documented in rlbd(8)).
//!
//! On the wire (the control socket's `status` answer) the report is one JSON object on one
//! line. Rates are bit/s as floating-point numbers, counters and ages are non-negative integers,
//! MAC addresses are lower-case `aa:bb:cc:dd:ee:ff`, IP addresses dotted quads (IPv4) or RFC 5952
//! text (IPv6). A field marked
//! "null when" is JSON `null` in that case; every other field is always present. Readers should
//! ignore fields they do not know: later versions may add some without changing `schema`.

use serde::{Deserialize, Serialize};

pub use crate::policy::Reason;

/// What rlbd steers among.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A bond's slaves.
    #[default]
    Bond,
    /// Plain ports that share the server's address.
    Ports,
}

/// A port's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PortState {
    Up,
    Down,
    /// Gone from the kernel (removed, or released from the bond); kept so its index stays.
    Absent,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Bond => "bond",
            Mode::Ports => "ports",
        }
    }
}

impl PortState {
    pub fn as_str(self) -> &'static str {
        match self {
            PortState::Up => "up",
            PortState::Down => "down",
            PortState::Absent => "absent",
        }
    }
}

/// Bumped only on an incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// The whole report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    /// Schema version of this report ([`SCHEMA_VERSION`]); bumped only on an incompatible change.
    pub schema: u32,
    /// rlbd's version, e.g. "0.1.0".
    pub version: String,
    /// "bond" (steering among a bond's slaves) or "ports" (plain ports sharing an address).
    pub mode: Mode,
    /// The bond's name, or the first port's.
    pub name: String,
    /// True when rlbd decides and logs but sends nothing (`--dry-run`).
    pub dry_run: bool,
    /// Seconds since the daemon started.
    pub uptime_secs: u64,
    /// One-second ticks since start (the clock of `last_seen_secs_ago`, `secs_ago`).
    pub tick: u64,
    /// Overload threshold as a fraction of a port's capacity, in (0, 1].
    pub threshold: f64,
    /// One-second samples in a port's overload window.
    pub window: usize,
    /// Samples over the threshold within the window that make a port overloaded.
    pub hits: usize,
    /// Seconds a moved client stays where it was put before it may move again.
    pub hold_down_secs: u64,
    /// Utilization from which a port counts as saturated, in force: the configured
    /// `saturated`, raised to 2% under `saturation_ceiling` once that is learned.
    #[serde(default)]
    pub saturated: f64,
    /// How full a move off a saturated port may make its target, in force: the configured
    /// `max_fill`, raised to 2.5% under `saturation_ceiling` once that is learned.
    #[serde(default)]
    pub max_fill: f64,
    /// Where a full port reads, as a utilization, learned from the busiest port's readings at
    /// or over the configured `saturated`; null until a port has read that much.
    #[serde(default)]
    pub saturation_ceiling: Option<f64>,
    /// Every port rlbd steers among or has seen (an absent one is kept with state "absent").
    pub ports: Vec<PortStatus>,
    /// The tracked clients, largest rate first (ties by IP): every one, or the busiest N when the
    /// request asked for `top=N` (`totals.clients_tracked` counts them all).
    pub clients: Vec<ClientStatus>,
    /// Counters since start, and the client table's size.
    pub totals: Totals,
    /// The guests behind the bond rlbd balances (`[guests]`), busiest first. Absent in older
    /// reports.
    #[serde(default)]
    pub guests: Vec<crate::guests::GuestStatus>,
    /// Guests placed, moved by reason and released since start. Absent in older reports.
    #[serde(default)]
    pub guest_totals: crate::guests::GuestTotals,
}

/// One port (bond slave, or plain port in ports mode).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortStatus {
    /// Interface name.
    pub name: String,
    /// Kernel interface index, as last seen.
    pub ifindex: u32,
    /// The port's own MAC: the one rlbd tells clients to use to land on this port.
    pub mac: String,
    /// "up", "down" or "absent".
    pub state: PortState,
    /// Capacity used for utilization, bit/s: `--capacity`/`[capacity]`, else the link speed.
    pub capacity_bps: f64,
    /// Receive rate over the last second, bit/s; null when there was no usable reading.
    pub rx_bps: Option<f64>,
    /// `rx_bps / capacity_bps` (may exceed 1); null when `rx_bps` is null.
    pub utilization: Option<f64>,
    /// Receive byte counter as last read from the kernel; null before the first reading.
    pub rx_bytes: Option<u64>,
    /// The overload window, oldest first: `x` over threshold, `.` under, `?` no reading, `_` not
    /// yet sampled; `window` characters.
    pub window: String,
    /// True while the detector holds the port overloaded (`hits` of the window over threshold).
    pub overloaded: bool,
    /// Frames the port's capture ring delivered since start.
    pub ring_packets: u64,
    /// Frames the port's capture ring dropped since start (rlbd fell behind).
    pub ring_drops: u64,
    /// Clients whose latest frame arrived on this port.
    pub clients: usize,
    /// The port's sampling ratio: one IPv4/IPv6 frame in this many is counted (and counts this
    /// many times); 1 while every frame is counted. Added after schema 1's first release:
    /// absent in older reports, hence the default.
    #[serde(default = "exact")]
    pub sampling: u32,
    /// How the port counts IPv4/IPv6 frames: "ebpf" (every frame, in the kernel), "exact"
    /// (every captured frame) or "sampled" (one captured frame in `sampling`). Added after
    /// schema 1's first release: absent in older reports (read as "exact" or "sampled" from
    /// `sampling`).
    #[serde(default)]
    pub counting: Counting,
    /// While counting in the kernel: where the program runs, "tc" (the port's tc hooks, no
    /// packet tap) or "socket" (a filter on the capture socket); null otherwise. Added after
    /// schema 1's first release: absent in older reports.
    #[serde(default)]
    pub counting_hook: Option<String>,
    /// While the port is overloaded and nothing moves off it: why, in words; null otherwise.
    #[serde(default)]
    pub no_move: Option<String>,
    /// Frames the port's counting map in the kernel could give to no client since its socket
    /// opened (the map was full; those seconds make no move). Added after schema 1's first
    /// release: absent in older reports.
    #[serde(default)]
    pub uncounted_frames: u64,
    /// Bytes of IPv4/IPv6 frames counted for clients on this port since rlbd found it, up to
    /// the reading of `rx_bytes` (scaled by the sampling ratio; the frames' length as
    /// received, a tag the NIC took out not included, as in `rx_bytes`). Beside `rx_bytes` it
    /// shows what counting covers. Added after schema 1's first release: absent in older
    /// reports.
    #[serde(default)]
    pub counted_bytes: u64,
    /// Guests pinned to this port (`[guests]`). Absent in older reports.
    #[serde(default)]
    pub guests: usize,
}

fn exact() -> u32 {
    1
}

/// One tracked client (a MAC and its address sending to the server).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientStatus {
    /// The client's address: IPv4, or IPv6 for a client that has sent only IPv6.
    pub ip: String,
    /// The client's MAC.
    pub mac: String,
    /// The VLAN it is on (0: untagged). One host on two VLANs is two clients.
    #[serde(default)]
    pub vlan: u16,
    /// The port its latest frame arrived on ("?" if that port is gone).
    pub port: String,
    /// bit/s over the last second.
    pub rate_bps: f64,
    /// Seconds (ticks) since its last frame.
    pub last_seen_secs_ago: u64,
    /// Present when rlbd moved it and still steers it; null otherwise.
    pub moved: Option<MoveStatus>,
    /// The port `[clients]` pins it to; absent when none does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<String>,
    /// `[clients]` excludes it: never moved, never sent an update.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub excluded: bool,
}

/// Where and why rlbd moved a client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MoveStatus {
    /// Where rlbd sent it (port name; "?" if that port is gone).
    pub to: String,
    /// Seconds since the move.
    pub secs_ago: u64,
    /// "overload", "failover", "placement" (a new client's first placement, balance-tlb) or
    /// "room" (moved between two ports with room to gather it for a saturated port's client) or
    /// "settle" (a correction of an overload or room move a few seconds after it).
    pub reason: Reason,
    /// Seconds before it may be moved again for overload (0 when free to move).
    pub hold_down_left_secs: u64,
    /// Times rlbd re-sent the update because the kernel's own ARP would have undone the move.
    pub reasserts: u64,
    /// The server addresses claimed toward it (each one it talks to).
    #[serde(default)]
    pub addresses: Vec<String>,
}

/// Counters since start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Clients moved off an overloaded port.
    pub moves_overload: u64,
    /// Clients moved off a port that went down or disappeared.
    pub moves_failover: u64,
    /// First placements of new clients (balance-tlb only). Added after schema 1's first
    /// release: absent in older reports, hence the default.
    #[serde(default)]
    pub moves_placement: u64,
    /// Clients moved between two ports with room, to gather room for a saturated port's
    /// client. Absent in older reports.
    #[serde(default)]
    pub moves_room: u64,
    /// Corrections of a move a few seconds after it (`settle`). Absent in older reports.
    #[serde(default)]
    pub moves_settle: u64,
    /// Updates re-sent to keep moved clients where rlbd put them.
    pub reasserts: u64,
    /// ARP updates sent (first sends, repeats and re-assertions).
    pub updates_sent: u64,
    /// ARP updates held back by the per-client or total rate limit.
    pub updates_suppressed: u64,
    /// First frames of moves that waited for their turn under the total rate limit (sent
    /// late, not lost). Absent in older reports.
    #[serde(default)]
    pub updates_deferred: u64,
    /// Clients in the rate table now.
    pub clients_tracked: usize,
    /// Clients rlbd has moved and still steers. Added after schema 1's first release.
    #[serde(default)]
    pub clients_moved: usize,
    /// Clients the table holds at most (`capture.table_size`).
    pub table_capacity: usize,
    /// Clients evicted from the full table (least recently seen first).
    pub table_evictions: u64,
    /// Clients forgotten after the idle timeout.
    pub table_expirations: u64,
    /// The fields below were added after schema 1's first release: absent in older reports.
    /// Update frames the kernel refused to send (ENOBUFS, ENETDOWN...), first tries and
    /// retries alike.
    #[serde(default)]
    pub send_errors: u64,
    /// Refused update frames sent again later (transient errors only, with backoff).
    #[serde(default)]
    pub send_retries: u64,
    /// Moves not made because the kernel refused every frame of them (counted in the moves
    /// above as well: those count decisions).
    #[serde(default)]
    pub moves_refused: u64,
    /// Seconds whose client rates were not used for moves because a capture ring dropped
    /// frames in them (the split among clients was incomplete).
    #[serde(default)]
    pub unreliable_seconds: u64,
    /// Times the kernel dropped netlink notifications (ENOBUFS) and rlbd re-read its tables.
    #[serde(default)]
    pub netlink_resyncs: u64,
    /// Neighbours on the server's interfaces that rlbd holds as confirmed by the kernel.
    #[serde(default)]
    pub neighbours: usize,
    /// Episodes of another host claiming one of the server's addresses on the wire.
    #[serde(default)]
    pub foreign_claims: u64,
    /// The latest the loop ran a due timer (a repeat, a re-assertion, the second's tick), ms
    /// after it was due, since start.
    #[serde(default)]
    pub timer_late_max_ms: u64,
    /// Timers run more than 100 ms after they were due, since start.
    #[serde(default)]
    pub timers_late: u64,
}

impl Totals {
    /// Every move since start, of any reason.
    pub fn moves(&self) -> u64 {
        self.moves_overload
            + self.moves_failover
            + self.moves_placement
            + self.moves_room
            + self.moves_settle
    }

    /// The moves by reason, as the status text and the state dump both print them:
    /// "overload A, failover B, placement C, room D, settle E".
    pub fn moves_by_reason(&self) -> String {
        format!(
            "overload {}, failover {}, placement {}, room {}, settle {}",
            self.moves_overload,
            self.moves_failover,
            self.moves_placement,
            self.moves_room,
            self.moves_settle
        )
    }
}

/// How a port counts IPv4/IPv6 frames (`PortStatus::counting`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Counting {
    /// In the kernel, every frame (eBPF).
    Ebpf,
    /// From captured frames, every one.
    Exact,
    /// From captured frames, one in `sampling`.
    Sampled,
    /// Not said: a report from before the field (read from `sampling`).
    #[default]
    #[serde(rename = "")]
    Unknown,
}

impl Counting {
    pub fn as_str(self) -> &'static str {
        match self {
            Counting::Ebpf => "ebpf",
            Counting::Exact => "exact",
            Counting::Sampled => "sampled",
            Counting::Unknown => "",
        }
    }
}

impl StatusReport {
    /// The one-line summary: the log at start, systemd's `STATUS=`, SIGUSR1's dump.
    pub fn summary(&self) -> String {
        let ports: Vec<String> = self
            .ports
            .iter()
            .filter(|p| p.state != PortState::Absent)
            .map(|p| {
                let down = p.state == PortState::Down;
                format!("{}{}", p.name, if down { "(down)" } else { "" })
            })
            .collect();
        let what = match self.mode {
            Mode::Bond => format!("bond {}", self.name),
            Mode::Ports => "ports".to_string(),
        };
        let ports = if ports.is_empty() {
            "no ports".to_string()
        } else {
            ports.join(" ")
        };
        let t = &self.totals;
        format!(
            "{what}: {ports}; {} clients, {} moved, {} updates sent{}",
            t.clients_tracked,
            t.clients_moved,
            t.updates_sent,
            if self.dry_run { " (dry run)" } else { "" }
        )
    }
}
