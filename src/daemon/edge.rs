//! The edge: the event loop's poll, the netlink reader, the capture sockets and the state file,
//! and the routing of the engine's outputs to them. It carries out; it does not decide.

use mio::Poll;

use super::captures::Captures;
use super::guests::GuestIo;
use super::netlink::NetlinkReader;
use super::state_file::StateFile;
use super::{monotonic_ms, setup};
use crate::engine::{Engine, Input, Output};
use crate::exit::Failure;

pub struct Edge {
    pub poll: Poll,
    pub nl: NetlinkReader,
    /// Before the captures: fields drop in order, and a port's guest program must come off
    /// before its counting one (whose attachment may have made the clsact qdisc).
    pub guests: GuestIo,
    pub captures: Captures,
    pub state: StateFile,
}

impl Edge {
    /// Carries out everything the engine asked for since the last call.
    pub fn route(&mut self, engine: &mut Engine) {
        while let Some(o) = engine.poll_output() {
            self.carry(engine, o);
        }
    }

    /// Carries out one output; a frame's outcome goes back to the engine at once.
    pub fn carry(&mut self, engine: &mut Engine, o: Output) {
        match o {
            Output::Send { port, tag, frame } => {
                let result = match self.captures.try_send(port, &frame) {
                    Some(Ok(())) => Ok(()),
                    Some(Err(e)) => Err(Some(e.raw_os_error().unwrap_or(libc::EIO))),
                    // No socket: the port is gone.
                    None => Err(None),
                };
                let input = Input::SendResult { tag, frame, result };
                engine.handle(monotonic_ms(), input);
            }
            Output::Log {
                level,
                text,
                fields,
                ..
            } => crate::logging::emit(level, module_path!(), &text, &fields),
            Output::OpenCapture { port } => {
                let error = self.open_capture(engine, port).err();
                let error = error.map(|e| e.to_string());
                self.opened(engine, port, error);
                let r = self
                    .guests
                    .port_opened(engine.ports(), port, &self.captures);
                self.guest_path_result(engine, r);
            }
            Output::CloseCapture { port } => {
                self.guests.port_closed(port);
                self.captures.close(port, self.poll.registry());
            }
            Output::Refilter => self.captures.refilter(engine.ports()),
            Output::HostMacs(macs) => self.captures.set_host_macs(engine.ports(), macs),
            Output::RequestCounters { ifindex } => self.nl.request_counters(ifindex),
            Output::Redump => self.nl.redump(),
            Output::Summary(s) => setup::sd_notify(&format!("STATUS={s}")),
            // Only asked for by a request, which takes it out itself.
            Output::Status(_) => {}
            Output::Persist(p) => self.state.write(&p),
            Output::GuestPath { on } => {
                let r = self.guests.set(on, engine.ports(), &self.captures);
                self.guest_path_result(engine, r);
            }
            Output::PinGuest { key, port, ifindex } => self.guests.pin(key, port, ifindex),
            Output::UnpinGuest { key } => self.guests.unpin(key),
        }
    }

    /// The guest path could not be had: the engine is told why (it gives guests up).
    fn guest_path_result(&mut self, engine: &mut Engine, r: Result<(), String>) {
        if let Err(why) = r {
            self.guests = GuestIo::default();
            // The verifier's log is for a developer; the engine's error says what failed.
            let (short, log) = why.split_once("; verifier log").unwrap_or((&why, ""));
            if !log.is_empty() {
                log::debug!("guests: verifier log{log}");
            }
            let why = short.to_string();
            engine.handle(monotonic_ms(), Input::GuestPathFailed { why });
        }
    }

    /// A port appeared: its capture socket.
    fn open_capture(&mut self, engine: &Engine, port: usize) -> std::io::Result<()> {
        self.captures
            .open(engine.ports(), port, self.poll.registry())
    }

    /// Tells the engine a port's capture is open (or why not), with its link's speed.
    fn opened(&mut self, engine: &mut Engine, port: usize, error: Option<String>) {
        let name = engine.ports().list.get(port).map(|p| p.name.clone());
        let speed_mbps = name.and_then(|n| crate::netlink::link_speed_mbps(&n));
        let input = Input::CaptureOpened {
            port,
            speed_mbps,
            error,
        };
        engine.handle(monotonic_ms(), input);
    }

    /// Routes the start-up's outputs: a port present at start without a capacity or a capture
    /// socket is fatal (rlbd cannot run half blind).
    pub fn route_start(&mut self, engine: &mut Engine) -> Result<(), Failure> {
        while let Some(o) = engine.poll_output() {
            let Output::OpenCapture { port } = o else {
                self.carry(engine, o);
                continue;
            };
            let name = engine.ports().list[port].name.clone();
            self.open_capture(engine, port).map_err(|e| {
                Failure::io(
                    &format!("port {name}: cannot open capture socket (needs CAP_NET_RAW)"),
                    e,
                )
            })?;
            self.opened(engine, port, None);
            let r = self
                .guests
                .port_opened(engine.ports(), port, &self.captures);
            self.guest_path_result(engine, r);
            if engine.ports().list[port].capacity_bps <= 0.0 {
                return Err(Failure::config(format!("port {name}: no usable link speed; give its capacity with --capacity {name}=MBIT or [capacity] in the configuration file")));
            }
        }
        Ok(())
    }
}
