//! The edge: the event loop's poll, the netlink reader, the capture sockets and the state file,
//! and the routing of the engine's outputs to them. It carries out; it does not decide. What
//! became of an output (a frame sent or refused, a socket opened, a hook attached) is queued
//! and handed to the engine once the outputs of the moment are routed, never while they are.

use mio::Poll;

use super::captures::Captures;
use super::guests::GuestIo;
use super::netlink::NetlinkReader;
use super::state_file::StateFile;
use super::{monotonic_ms, setup};
use crate::engine::{CountingHook, Engine, HookFacts, Input, Output, PortId, PortRef, SendTag};
use crate::exit::Failure;

/// What became of an output, for the engine.
enum Outcome {
    Sent {
        tag: SendTag,
        frame: Vec<u8>,
        result: Result<(), Option<i32>>,
    },
    Opened {
        port: PortId,
        speed_mbps: Option<u64>,
        error: Option<String>,
    },
    Hooked {
        port: PortId,
        hook: CountingHook,
        result: Result<HookFacts, String>,
    },
    GuestPathFailed(String),
}

impl Outcome {
    fn input(self) -> Input<'static> {
        match self {
            Outcome::Sent { tag, frame, result } => Input::SendResult { tag, frame, result },
            Outcome::Opened {
                port,
                speed_mbps,
                error,
            } => Input::CaptureOpened {
                port,
                speed_mbps,
                error,
            },
            Outcome::Hooked { port, hook, result } => Input::HookAttached { port, hook, result },
            Outcome::GuestPathFailed(why) => Input::GuestPathFailed { why },
        }
    }
}

pub struct Edge {
    pub poll: Poll,
    pub nl: NetlinkReader,
    /// Before the captures: fields drop in order, and a port's guest program must come off
    /// before its counting one (whose attachment may have made the clsact qdisc).
    pub guests: GuestIo,
    pub captures: Captures,
    pub state: StateFile,
    /// Outcomes waiting for the engine.
    queued: Vec<Outcome>,
    /// At start a capture that will not open is fatal: the first such port and why.
    starting: Option<Option<(String, std::io::Error)>>,
    /// A reload's log level, applied when the engine accepts the reload.
    pub reload_level: Option<String>,
    /// The engine's answer to the last reload.
    pub reloaded: Option<Result<String, String>>,
}

impl Edge {
    pub fn new(poll: Poll, nl: NetlinkReader, captures: Captures, state: StateFile) -> Edge {
        Edge {
            poll,
            nl,
            guests: GuestIo::default(),
            captures,
            state,
            queued: Vec::new(),
            starting: None,
            reload_level: None,
            reloaded: None,
        }
    }

    /// Carries out everything the engine asked for, then hands it what became of it, until
    /// it asks for nothing more.
    pub fn route(&mut self, engine: &mut Engine) {
        loop {
            while let Some(o) = engine.poll_output() {
                self.carry(o);
            }
            if self.queued.is_empty() {
                return;
            }
            for q in std::mem::take(&mut self.queued) {
                engine.handle(monotonic_ms(), q.input());
            }
        }
    }

    /// Carries out one output; what became of it is queued for the engine.
    pub fn carry(&mut self, o: Output) {
        match o {
            Output::Send { port, tag, frame } => {
                let result = match self.captures.try_send(port.id, &frame) {
                    Some(Ok(())) => Ok(()),
                    Some(Err(e)) => Err(Some(e.raw_os_error().unwrap_or(libc::EIO))),
                    // No socket: the port is gone.
                    None => Err(None),
                };
                self.queued.push(Outcome::Sent { tag, frame, result });
            }
            Output::Log {
                level,
                text,
                fields,
                ..
            } => crate::logging::emit(level, module_path!(), &text, &fields),
            Output::OpenCapture { port } => self.open_capture(&port),
            Output::AttachHook { port, hook } => {
                let registry = self.poll.registry();
                let result = self.captures.attach_hook(&port, hook, registry);
                let port = port.id;
                self.queued.push(Outcome::Hooked { port, hook, result });
            }
            Output::SetSampling { port, one_in } => self.captures.set_sampling(&port, one_in),
            Output::CloseCapture { port } => {
                self.guests.port_closed(port.id.index());
                self.captures.close(port.id.index(), self.poll.registry());
            }
            Output::Refilter { port_macs } => self.captures.set_port_macs(port_macs),
            Output::HostMacs(macs) => self.captures.set_host_macs(macs),
            Output::RequestCounters { ifindex } => self.nl.request_counters(ifindex),
            Output::Redump => self.nl.redump(),
            Output::Summary(s) => setup::sd_notify(&format!("STATUS={s}")),
            // Only asked for by a request, which takes it out itself.
            Output::Status(_) => {}
            Output::Persist(p) => self.state.write(&p),
            Output::GuestPath { on, bond } => {
                let r = self.guests.set(on, bond.as_ref());
                self.guest_path_result(r);
            }
            Output::GuestPort { port } => {
                let r = self.guests.port_opened(&port, &self.captures);
                self.guest_path_result(r);
            }
            Output::PinGuest { key, port } => self.guests.pin(key, port.id.index(), port.ifindex),
            Output::UnpinGuest { key } => self.guests.unpin(key),
            Output::Reloaded(answer) => {
                if let (Ok(_), Some(level)) = (&answer, self.reload_level.take()) {
                    crate::logging::set_level(&level);
                }
                self.reloaded = Some(answer);
            }
        }
    }

    /// The guest path could not be had: the engine is told why (it gives guests up).
    fn guest_path_result(&mut self, r: Result<(), String>) {
        if let Err(why) = r {
            self.guests = GuestIo::default();
            self.queued.push(Outcome::GuestPathFailed(why));
        }
    }

    /// A port appeared: its capture socket, and the link's speed for the engine.
    fn open_capture(&mut self, port: &PortRef) {
        let error = match self.captures.open(port, self.poll.registry()) {
            Ok(()) => None,
            Err(e) => match &mut self.starting {
                // At start: fatal, the engine is not told (the daemon exits).
                Some(first) => {
                    first.get_or_insert((port.name.to_string(), e));
                    return;
                }
                None => Some(e.to_string()),
            },
        };
        let speed_mbps = crate::netlink::link_speed_mbps(&port.name);
        let port = port.id;
        self.queued.push(Outcome::Opened {
            port,
            speed_mbps,
            error,
        });
    }

    /// Routes the start-up's outputs: a port present at start without a capture socket or a
    /// capacity is fatal (rlbd cannot run half blind).
    pub fn route_start(&mut self, engine: &mut Engine) -> Result<(), Failure> {
        self.starting = Some(None);
        self.route(engine);
        if let Some(Some((name, e))) = self.starting.take() {
            let what = format!("port {name}: cannot open capture socket (needs CAP_NET_RAW)");
            return Err(Failure::io(&what, e));
        }
        if let Some(name) = engine.port_without_capacity() {
            return Err(Failure::config(format!("port {name}: no usable link speed; give its capacity with --capacity {name}=MBIT or [capacity] in the configuration file")));
        }
        Ok(())
    }
}
