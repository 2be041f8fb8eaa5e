//! Reload requests on the control socket. The socket's answers are built from a shared view of
//! the daemon; a reload changes it, so the loop carries it out after the turn's events
//! ([`Control::reload_requested`]) and hands the result back ([`Control::answer_reloads`]).

use mio::Registry;

use super::Control;

impl Control {
    /// True when a connection waits for a reload.
    pub fn reload_requested(&self) -> bool {
        self.conns.iter().flatten().any(|c| c.reload)
    }

    /// Answers every connection waiting for a reload with its result: `Ok(what was done)` or
    /// `Err(why nothing was)`.
    pub fn answer_reloads(&mut self, result: &Result<String, String>, registry: &Registry) {
        let line = match result {
            Ok(done) => format!("ok: {done}\n"),
            Err(why) => format!("error: {why}\n"),
        };
        for slot in 0..self.conns.len() {
            let Some(c) = self.conns[slot].as_mut().filter(|c| c.reload) else {
                continue;
            };
            c.reload = false;
            c.answer = line.clone().into_bytes();
            // Written now if the socket takes it (a short line does), else when writable.
            self.service(slot, registry, &mut NoStatus);
        }
    }
}

/// The answer is set already: no report is built for it.
struct NoStatus;

impl super::Responder for NoStatus {
    fn status(&mut self, _: Option<usize>) -> crate::status::StatusReport {
        crate::status::StatusReport::default()
    }
    fn metrics(&mut self) -> String {
        String::new()
    }
}
