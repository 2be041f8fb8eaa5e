//! What the shell tells about the daemon: the status the engine reports, with the capture
//! sockets' own figures filled in (the control socket, the metrics file, systemd's STATUS=).

use log::warn;

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

/// Every socket's figures, by port (for the engine's state dump).
pub fn capture_facts(captures: &Captures) -> Vec<crate::engine::CaptureFacts> {
    (0..captures.ready.len())
        .map(|i| captures.facts(i))
        .collect()
}
