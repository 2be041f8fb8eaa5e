//! Routing the engine's outputs to the parts of the shell that carry them out, and answering
//! the control socket's requests through the engine's door.

use log::{info, warn};

use super::captures::Captures;
use super::control::Responder;
use super::{monotonic_ms, setup, Daemon};
use crate::engine::{Engine, Input, Output};
use crate::status::StatusReport;

impl Daemon {
    /// Carries out everything the engine asked for since the last call.
    pub(super) fn route(&mut self) {
        while let Some(o) = self.engine.poll_output() {
            self.carry(o);
        }
    }

    /// Routes what answering a request took out of the engine besides the answer.
    pub(super) fn route_stashed(&mut self) {
        for o in std::mem::take(&mut self.stashed) {
            self.carry(o);
        }
        self.route();
    }

    pub(super) fn carry(&mut self, o: Output) {
        match o {
            Output::Send { port, tag, frame } => {
                let result = match self.captures.try_send(port, &frame) {
                    Some(Ok(())) => Ok(()),
                    Some(Err(e)) => Err(Some(e.raw_os_error().unwrap_or(libc::EIO))),
                    // No socket: the port is gone.
                    None => Err(None),
                };
                let input = Input::SendResult { tag, frame, result };
                self.engine.handle(monotonic_ms(), input);
            }
            Output::Log { level, text, .. } => log::log!(level, "{text}"),
            Output::OpenCapture { port } => self.open_capture(port),
            Output::CloseCapture { port } => self.captures.close(port, self.poll.registry()),
            Output::Refilter => self.captures.refilter(self.engine.ports()),
            Output::HostMacs(macs) => self.captures.set_host_macs(self.engine.ports(), macs),
            Output::RequestCounters { ifindex } => self.nl.request_counters(ifindex),
            Output::Redump => self.nl.redump(),
            Output::Summary(s) => setup::sd_notify(&format!("STATUS={s}")),
            // Only asked for by a request, which takes it out itself.
            Output::Status(_) => {}
            Output::Persist(p) => self.state.write(&p),
        }
    }

    /// A port appeared: its capture socket, and its link speed for the engine.
    fn open_capture(&mut self, port: usize) {
        let Some(name) = self.engine.ports().list.get(port).map(|p| p.name.clone()) else {
            return;
        };
        let error = self
            .captures
            .open(self.engine.ports(), port, self.poll.registry())
            .err()
            .map(|e| e.to_string());
        let speed_mbps = crate::netlink::link_speed_mbps(&name);
        let input = Input::CaptureOpened {
            port,
            speed_mbps,
            error,
        };
        self.engine.handle(monotonic_ms(), input);
    }

    /// The status as the engine reports it, with the capture sockets' figures.
    pub(super) fn status(&mut self, top: Option<usize>) -> StatusReport {
        answer_status(&mut self.engine, &self.captures, &mut self.stashed, top)
    }

    /// The one-line summary (log, systemd's STATUS=).
    pub(super) fn summary(&mut self) -> String {
        let r = self.status(Some(0));
        let ports: Vec<String> = r
            .ports
            .iter()
            .filter(|p| p.state != crate::status::PortState::Absent)
            .map(|p| {
                let down = p.state == crate::status::PortState::Down;
                format!("{}{}", p.name, if down { "(down)" } else { "" })
            })
            .collect();
        let what = match r.mode {
            crate::status::Mode::Bond => format!("bond {}", r.name),
            crate::status::Mode::Ports => "ports".to_string(),
        };
        let ports = if ports.is_empty() {
            "no ports".to_string()
        } else {
            ports.join(" ")
        };
        let t = &r.totals;
        format!(
            "{what}: {ports}; {} clients, {} moved, {} updates sent{}",
            t.clients_tracked,
            t.clients_moved,
            t.updates_sent,
            if r.dry_run { " (dry run)" } else { "" }
        )
    }

    /// SIGUSR1: the whole state into the log.
    pub(super) fn log_state(&mut self) {
        let summary = self.summary();
        let r = self.status(None);
        info!("state: {summary}");
        for p in &r.ports {
            info!(
                "  port {} ifindex {} mac {} {} capacity {:.0} Mbit/s rx {} window {} ring drops {} \
                 counting {} sampling 1/{} uncounted {}",
                p.name,
                p.ifindex,
                p.mac,
                p.state.as_str(),
                p.capacity_bps / 1e6,
                p.rx_bps
                    .map_or("-".into(), |r| format!("{:.1} Mbit/s", r / 1e6)),
                p.window,
                p.ring_drops,
                p.counting.as_str(),
                p.sampling,
                p.uncounted_frames
            );
        }
        for c in &r.clients {
            let moved = c.moved.as_ref().map_or(String::new(), |m| {
                format!(
                    ", moved {}s ago ({}), re-asserted {}x",
                    m.secs_ago,
                    m.reason.as_str(),
                    m.reasserts
                )
            });
            info!(
                "  client {} {} on {} {:.2} Mbit/s{moved}",
                c.ip,
                c.mac,
                c.port,
                c.rate_bps / 1e6
            );
        }
        let t = &r.totals;
        info!(
            "  totals: moves overload {} failover {} placement {} room {}, re-assertions {}, updates sent {}, suppressed {}, table evictions {}",
            t.moves_overload,
            t.moves_failover,
            t.moves_placement,
            t.moves_room,
            t.reasserts,
            t.updates_sent,
            t.updates_suppressed,
            t.table_evictions
        );
    }
}

/// Asks the engine for its status and fills in the capture sockets' figures; anything else the
/// engine hands out meanwhile is stashed for the loop to route.
fn answer_status(
    engine: &mut Engine,
    captures: &Captures,
    stash: &mut Vec<Output>,
    top: Option<usize>,
) -> StatusReport {
    engine.handle(monotonic_ms(), Input::StatusQuery { top });
    let mut report = None;
    while let Some(o) = engine.poll_output() {
        match o {
            Output::Status(r) => report = Some(*r),
            o => stash.push(o),
        }
    }
    let Some(mut r) = report else {
        warn!("the engine gave no status");
        return StatusReport::default();
    };
    for (i, p) in r.ports.iter_mut().enumerate() {
        captures.facts(i).fill(p);
    }
    r
}

/// The control server's view of the daemon: answers through the engine's door.
pub(super) struct Answers<'a> {
    pub engine: &'a mut Engine,
    pub captures: &'a Captures,
    pub stash: &'a mut Vec<Output>,
}

impl Responder for Answers<'_> {
    fn status(&mut self, top: Option<usize>) -> StatusReport {
        answer_status(self.engine, self.captures, self.stash, top)
    }

    fn metrics(&mut self) -> String {
        let r = answer_status(self.engine, self.captures, self.stash, Some(0));
        crate::metrics::render(&r)
    }
}
