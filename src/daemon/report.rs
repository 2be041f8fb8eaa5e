//! What the shell tells about the daemon: the status the engine reports, with the capture
//! sockets' own figures filled in (the control socket, the metrics file, SIGUSR1's dump,
//! systemd's STATUS=).

use log::{info, warn};

use super::captures::Captures;
use super::control::Responder;
use super::monotonic_ms;
use crate::engine::{Engine, Input, Output};
use crate::status::StatusReport;

/// Asks the engine for its status and fills in the capture sockets' figures; anything else the
/// engine hands out meanwhile is stashed for the loop to route.
pub fn answer_status(
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

/// SIGUSR1: the whole state into the log (`r` with every client).
pub fn log_state(r: &StatusReport) {
    info!("state: {}", r.summary());
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
        "  totals: moves overload {} failover {} placement {} room {} settle {}, re-assertions {}, updates sent {}, suppressed {}, table evictions {}",
        t.moves_overload,
        t.moves_failover,
        t.moves_placement,
        t.moves_room,
        t.moves_settle,
        t.reasserts,
        t.updates_sent,
        t.updates_suppressed,
        t.table_evictions
    );
}
