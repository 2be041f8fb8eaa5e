//! SIGHUP: the configuration read again. What the shell holds (the log level, the capture
//! sockets' sampling limit, the control socket's settings) it applies itself; the rest goes to
//! the engine, which keeps all its state (moves, rates, the client table).

use log::error;

use super::{monotonic_ms, Daemon};
use crate::engine::Input;

impl Daemon {
    pub(super) fn reload_config(&mut self) {
        let new = match (self.reload)() {
            Ok(new) => new,
            Err(e) => {
                error!("SIGHUP: configuration not reloaded: {e}");
                return;
            }
        };
        self.captures
            .set_sampling_limit(self.engine.ports(), new.capture.sampling_limit());
        crate::logging::set_level(&new.log_level);
        self.observability = new.observability.clone();
        self.engine
            .handle(monotonic_ms(), Input::Reload(Box::new(new)));
        self.route();
    }
}
