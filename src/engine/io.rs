//! The engine's door, as types: what happened ([`Input`]), what to do ([`Output`]), what a log
//! record is about ([`Topic`]), what a frame to send was for ([`SendTag`]) and which port an
//! output is about ([`PortId`], [`PortRef`]).

use std::net::IpAddr;
use std::sync::Arc;

use log::Level;

use super::persist::Persisted;
use crate::capture::ebpf::Delta;
use crate::capture::Frame;
use crate::client::ClientKey;
use crate::config::Settings;
use crate::guests::GuestCount;
use crate::logging::Fields;
use crate::netlink::NlEvent;
use crate::status::StatusReport;

/// Something that happened, as the shell saw it.
#[derive(Debug)]
pub enum Input<'a> {
    /// Netlink messages read in one batch (links with their counters, addresses, neighbours,
    /// the kernel's word that it dropped some).
    Netlink(&'a [NlEvent]),
    /// A port's capture socket was opened (or could not be) after [`Output::OpenCapture`]: the
    /// link's speed, Mbit/s, as the kernel reports it (`None`: none reported).
    CaptureOpened {
        port: PortId,
        speed_mbps: Option<u64>,
        error: Option<String>,
    },
    /// What became of an [`Output::AttachHook`]: where the counting program went, or the
    /// kernel's refusal in words.
    HookAttached {
        port: PortId,
        hook: CountingHook,
        result: Result<HookFacts, String>,
    },
    /// One IPv4/IPv6 frame a capture ring handed over, `bytes` long (scaled by the sampling
    /// ratio), with what the kernel said of it: `for_host`, its packet type was "to this host"
    /// (the port's own MAC); `dst_mac`, where it was sent. Whether it is the server's load is
    /// the engine's to say.
    Counted {
        port: PortId,
        key: ClientKey,
        src: IpAddr,
        dst: IpAddr,
        bytes: u64,
        for_host: bool,
        dst_mac: crate::Mac,
    },
    /// A drain of port `port`'s capture ring handed over `frames` frames (a surge raises the
    /// sampling ratio before the next counter reading).
    Drained { port: PortId, frames: usize },
    /// A second ended: what the kernel counted per client in it (port, counts), and each
    /// port's capture facts, by index (missing: no socket).
    Second {
        counts: &'a [(PortId, Delta)],
        ports: &'a [PortSecond],
    },
    /// An ARP or Neighbor Discovery frame seen on a port, leaving (`outgoing`) or arriving.
    Frame {
        frame: &'a Frame,
        outgoing: bool,
        vlan: u16,
    },
    /// What became of an [`Output::Send`]: `Ok`, or the errno the kernel refused it with
    /// (`None`: the port has no socket). The frame comes back for a retry.
    SendResult {
        tag: SendTag,
        frame: Vec<u8>,
        result: Result<(), Option<i32>>,
    },
    /// A deadline the engine asked for ([`Engine::next_deadline`](super::Engine::next_deadline)) has passed.
    Deadline,
    /// New settings, read again on `why` ("SIGHUP", "reload request"); the bond or ports are
    /// kept.
    Reload {
        settings: Box<Settings>,
        why: &'a str,
    },
    /// The configuration could not be read again on `why`: `error` says where and what.
    ReloadFailed { why: &'a str, error: String },
    /// The state an earlier daemon left in `file` (a restart): its moves re-asserted, their
    /// hold-downs kept.
    Restore { state: Box<Persisted>, file: String },
    /// A second's counts of the guests behind the bond (their programs' maps), before
    /// [`Input::Second`].
    GuestCounts(&'a [GuestCount]),
    /// The guest path ([`Output::GuestPath`]) could not be had: a program that would not load
    /// or attach (Linux 5.10 without CAP_PERFMON), a port that would not go promiscuous.
    GuestPathFailed { why: String },
    /// The status, for the control socket (`top`: the busiest clients only; `Some(0)`: no
    /// client list, as the metrics want it).
    StatusQuery { top: Option<usize> },
    /// The whole state into the log (SIGUSR1), with each port's capture figures by index.
    DumpState {
        captures: &'a [super::report::CaptureFacts],
    },
    /// The shell is up: its sockets open, the start-up checks passed, an earlier daemon's
    /// state taken over.
    Started,
    /// The daemon exits on `signal` (SIGTERM, SIGINT).
    Stopping { signal: i32 },
}

/// What the engine asks the shell to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Send `frame` out of `port`, and report what became of it with the same tag
    /// ([`Input::SendResult`]).
    Send {
        port: PortRef,
        tag: SendTag,
        frame: Vec<u8>,
    },
    /// A log record; `fields` say what it is about as data (the journal's fields).
    Log {
        level: Level,
        topic: Topic,
        text: String,
        fields: Fields,
    },
    /// Open port `port`'s capture socket (a port appeared); answer with
    /// [`Input::CaptureOpened`].
    OpenCapture { port: PortRef },
    /// Close port `port`'s capture socket (the port is gone).
    CloseCapture { port: PortRef },
    /// Count port `port`'s frames in the kernel with the program at `hook`; answer with
    /// [`Input::HookAttached`]. Tc first; the socket's filter where tc is refused.
    AttachHook { port: PortRef, hook: CountingHook },
    /// Count one IPv4/IPv6 frame in `one_in` on port `port` from now on (its capture filter's
    /// or its counting program's draw).
    SetSampling { port: PortRef, one_in: u32 },
    /// The set of ports or their MACs changed: re-filter every capture for the present ports'
    /// MACs (`port_macs`) and the host's ([`Output::HostMacs`]).
    Refilter { port_macs: Vec<crate::Mac> },
    /// The MACs of the server's interfaces on the bond that are no port's (a macvlan's, a
    /// bridge's own), for the captures and the counting programs: frames to them are the
    /// server's load too. Handed out when the set changes.
    HostMacs(Vec<crate::Mac>),
    /// Ask the kernel for port `ifindex`'s counters (answered as a netlink link message).
    RequestCounters { ifindex: u32 },
    /// The kernel dropped notifications: dump links, addresses and neighbours again.
    Redump,
    /// A one-line summary for the service manager (`STATUS=`).
    Summary(String),
    /// The status report asked for ([`Input::StatusQuery`]), without the capture sockets'
    /// figures (the shell fills those in: [`CaptureFacts`](super::CaptureFacts)).
    Status(Box<StatusReport>),
    /// The durable state changed: write it to the state file (at most once a second).
    Persist(Box<Persisted>),
    /// Balance guests (`on`) or stop (`off`): the bond's egress program that sends each pinned
    /// guest's frames out of its port, each port's ingress program for the guests' frames, and
    /// the ports promiscuous (a non-active slave's filter holds only the bond's MACs).
    GuestPath {
        on: bool,
        /// The bond (ifindex, name) whose egress takes the program, when on.
        bond: Option<(u32, String)>,
    },
    /// Port `port`'s part of the guest path (its ingress program after the counting one, the
    /// port promiscuous): its counting is settled. A failure comes back as
    /// [`Input::GuestPathFailed`].
    GuestPort { port: PortRef },
    /// Send guest `key`'s frames out of port `port` and accept them there only.
    PinGuest { key: ClientKey, port: PortRef },
    /// Leave guest `key`'s frames to the kernel again.
    UnpinGuest { key: ClientKey },
    /// The answer to a reload ([`Input::Reload`], [`Input::ReloadFailed`]): what was done, or
    /// why nothing was. On `Ok` the shell applies what it holds itself (the log level, the
    /// control socket's settings); it comes before the reload's log records.
    Reloaded(Result<String, String>),
}

/// What a log record is about, so the shell (and tests) can tell records apart without reading
/// their words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    /// A client moved (or, dry run, would be).
    Move,
    /// An overloaded port nothing was moved off, and why.
    NoMove,
    /// A port appeared, went, changed state or MAC.
    Port,
    /// A frame the kernel refused.
    Send,
    /// Another host claims one of the server's addresses.
    ForeignClaim,
    /// The configuration (reload).
    Config,
    /// The kernel's view (netlink) or the capture path.
    Host,
    /// The state file of an earlier daemon.
    Restore,
    /// Everything else the steering core says.
    Steer,
    /// A guest behind the bond placed, moved or released.
    Guest,
    /// The daemon's life: stopping, the state dumped on demand.
    State,
}

/// What a frame the engine asked to send was for; it comes back with the frame's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendTag {
    /// An update telling `client` (at address `to`) to use `port`, for the core's move
    /// `move_id`; `tries` counts this one (1 for the first).
    Update {
        port: PortId,
        client: ClientKey,
        to: IpAddr,
        move_id: u64,
        tries: usize,
    },
    /// A frame that keeps the switch's MAC table pointing at `port` (plain ports).
    Learning { port: PortId },
    /// A guest's announcement (RARP from its MAC) out of the port it is pinned to.
    Announce { port: PortId, guest: ClientKey },
}

/// A port as the engine numbers it: its index in the port table, stable for the daemon's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct PortId(usize);

impl PortId {
    pub const fn new(index: usize) -> PortId {
        PortId(index)
    }

    pub const fn index(self) -> usize {
        self.0
    }
}

impl From<PortId> for usize {
    fn from(p: PortId) -> usize {
        p.0
    }
}

impl std::fmt::Display for PortId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "port #{}", self.0)
    }
}

/// A port named completely in an output: its index, its interface index and its name (the
/// shell looks nothing up). The name is shared, so an output costs no allocation for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortRef {
    pub id: PortId,
    pub ifindex: u32,
    pub name: Arc<str>,
}

/// Where a port's counting program runs: at its tc ingress hook (no tap sees the data frames),
/// or in place of its capture socket's filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountingHook {
    Tc,
    Socket,
}

impl CountingHook {
    pub fn as_str(self) -> &'static str {
        match self {
            CountingHook::Tc => "tc",
            CountingHook::Socket => "socket",
        }
    }
}

/// A counting program in place: where its counts live ("slots" or "hash"), how it is attached
/// at tc ("tcx" or "cls_bpf"), and why the slot table was not used, if it was not.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HookFacts {
    pub store: &'static str,
    pub tc_attach: Option<&'static str>,
    pub store_fallback: Option<String>,
}

/// A port's capture facts at the end of a second, as the shell reads them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortSecond {
    /// The packets its counting program has seen (after GRO; `None` where it does not count
    /// in the kernel).
    pub hook_packets: Option<u64>,
    /// Frames its capture ring dropped since its socket opened (`None`: not readable).
    pub ring_drops: Option<u64>,
    /// Its counting map as read this second.
    pub map: MapRead,
}

/// What reading a port's counting map gave.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum MapRead {
    /// The port does not count in the kernel.
    #[default]
    NotCounting,
    /// Read; `lost` frames were counted under no client (the map was full).
    Read { lost: u64 },
    /// Could not be read whole: the kernel's error.
    Failed(String),
}
