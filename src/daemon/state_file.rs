//! The state file (`/run/rlbd/NAME.state` under systemd): what the engine hands out as durable,
//! written atomically (a temporary file renamed over the old one), and read back at start. A
//! file that cannot be read or parsed is ignored with one warning: the daemon starts afresh.

use std::io::Write;
use std::path::PathBuf;

use log::{debug, warn};

use crate::engine::Persisted;

pub struct StateFile {
    path: Option<PathBuf>,
    /// A write failed: warned once until one succeeds again.
    failing: bool,
}

impl StateFile {
    /// `None`: no state file (not under a runtime directory, or switched off).
    pub fn new(path: Option<PathBuf>) -> Self {
        StateFile {
            path,
            failing: false,
        }
    }

    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }

    /// An earlier daemon's state, if there is a readable one.
    pub fn read(&self) -> Option<Persisted> {
        let path = self.path.as_ref()?;
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                warn!(
                    "state file {}: cannot read it: {e}; starting afresh",
                    path.display()
                );
                return None;
            }
        };
        match serde_json::from_str(&text) {
            Ok(p) => Some(p),
            Err(e) => {
                warn!(
                    "state file {} ignored: not a state file this rlbd can read ({e}); starting afresh",
                    path.display()
                );
                None
            }
        }
    }

    /// Writes `state` in place of the old file, atomically.
    pub fn write(&mut self, state: &Persisted) {
        let Some(path) = &self.path else {
            return;
        };
        let tmp = path.with_extension("state.tmp");
        let res = serde_json::to_vec(state)
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                let mut f = std::fs::File::create(&tmp)?;
                f.write_all(&bytes)?;
                f.write_all(b"\n")?;
                std::fs::rename(&tmp, path)
            });
        match res {
            Ok(()) => {
                if std::mem::take(&mut self.failing) {
                    warn!("state file {}: written again", path.display());
                }
                debug!("state file {} written", path.display());
            }
            Err(e) if !self.failing => {
                warn!("state file {}: cannot write it: {e}", path.display());
                self.failing = true;
            }
            Err(_) => {}
        }
    }
}
