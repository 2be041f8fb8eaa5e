//! The engine's door, as types: what happened ([`Input`]), what to do ([`Output`]), what a log
//! record is about ([`Topic`]) and what a frame to send was for ([`SendTag`]).

use std::net::IpAddr;

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
        port: usize,
        speed_mbps: Option<u64>,
        error: Option<String>,
    },
    /// One IPv4/IPv6 frame a capture ring counted for a client, `bytes` long (scaled by the
    /// sampling ratio).
    Counted {
        port: u16,
        key: ClientKey,
        src: IpAddr,
        dst: IpAddr,
        bytes: u64,
    },
    /// A second ended: what the kernel counted per client in it (port, counts), whether every
    /// counting map was read whole, and whether a capture ring that counts dropped frames.
    Second {
        counts: &'a [(usize, Delta)],
        whole: bool,
        ring_drops: bool,
        /// Each port's sampling, by index (missing: every packet counted).
        sampling: &'a [PortSampling],
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
}

/// What the engine asks the shell to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Send `frame` out of `port`, and report what became of it with the same tag
    /// ([`Input::SendResult`]).
    Send {
        port: usize,
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
    OpenCapture { port: usize },
    /// Close port `port`'s capture socket (the port is gone).
    CloseCapture { port: usize },
    /// The set of ports or their MACs changed: re-filter every capture.
    Refilter,
    /// The MACs of the server's interfaces on the bond (a macvlan's, a bridge's own), for the
    /// captures: frames to them are the server's load too.
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
    GuestPath { on: bool },
    /// Send guest `key`'s frames out of port `port` (`ifindex`) and accept them there only.
    PinGuest {
        key: ClientKey,
        port: usize,
        ifindex: u32,
    },
    /// Leave guest `key`'s frames to the kernel again.
    UnpinGuest { key: ClientKey },
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
}

/// What a frame the engine asked to send was for; it comes back with the frame's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendTag {
    /// An update telling `client` (at address `to`) to use `port`, for the core's move
    /// `move_id`; `tries` counts this one (1 for the first).
    Update {
        port: usize,
        client: ClientKey,
        to: IpAddr,
        move_id: u64,
        tries: usize,
    },
    /// A frame that keeps the switch's MAC table pointing at `port` (plain ports).
    Learning { port: usize },
    /// A guest's announcement (RARP from its MAC) out of the port it is pinned to.
    Announce { port: usize, guest: ClientKey },
}

/// A port's sampling as the shell reads it each second: one IPv4/IPv6 packet in `one_in`
/// counted, and the packets its counting program has seen (after GRO; `None` where it does not
/// count in the kernel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortSampling {
    pub one_in: u32,
    pub hook_packets: Option<u64>,
}
