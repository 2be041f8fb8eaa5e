//! The control socket (`/run/rlbd/NAME.sock`) and the metrics file, served by the daemon's own
//! event loop.
//!
//! One request per connection (the protocol is `crate::protocol`; the client `crate::statusview`).
//! Nothing here may block the loop: the listener and every connection are nonblocking, a request
//! is at most [`MAX_REQUEST`] bytes, an answer is built only for the request that asks for it
//! (a metrics scrape builds no client list), it is written as far as the
//! socket takes it and the rest when it is writable again, at most [`MAX_CONNS`] connections are
//! open at once (more are accepted, told so in one line, and closed), and a connection still open
//! [`DEADLINE`] after it was accepted (silent, or not reading its answer) is dropped.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use mio::event::Event;
use mio::net::UnixListener;
use mio::{Interest, Registry, Token};

use super::{CONTROL, CONTROL_CONN_BASE};
use crate::config::ObservabilityConfig;
use crate::exit::Failure;
use crate::protocol::MAX_REQUEST;
use crate::status::StatusReport;

/// What the daemon answers with; each is built only when a request (or the metrics file's timer)
/// asks for it.
pub trait Responder {
    /// The status report with the busiest `top` clients (all when `None`).
    fn status(&mut self, top: Option<usize>) -> StatusReport;
    /// The metrics in the Prometheus text format.
    fn metrics(&mut self) -> String;
}

/// A fixed report, as the tests use: cut to `top` clients, metrics rendered from the whole.
impl<F: Fn() -> StatusReport> Responder for F {
    fn status(&mut self, top: Option<usize>) -> StatusReport {
        let mut r = self();
        if let Some(n) = top {
            r.clients.truncate(n);
        }
        r
    }
    fn metrics(&mut self) -> String {
        crate::metrics::render(&self())
    }
}

/// Connections served at once.
pub const MAX_CONNS: usize = 8;
/// Time a connection may stay open, from accept to the last byte of its answer.
pub const DEADLINE: Duration = Duration::from_secs(2);
/// Connections accepted per wakeup; the listener is re-armed when more wait.
const ACCEPT_BATCH: usize = 32;
/// The first metrics file is written this long after start, when the first rates are in.
const FIRST_METRICS: Duration = Duration::from_secs(2);
const BUSY: &[u8] = b"error: too many connections; try again\n";

/// Whether `t` is the control listener's or one of its connections'.
pub fn owns(t: Token) -> bool {
    t == CONTROL || (CONTROL_CONN_BASE..CONTROL_CONN_BASE + MAX_CONNS).contains(&t.0)
}

struct Bound {
    path: PathBuf,
    listener: UnixListener,
    /// (device, inode) of the socket file we made: only that file is removed on exit.
    id: (u64, u64),
}

/// The control socket with its connections, and the metrics file's timer.
pub struct Control {
    bound: Option<Bound>,
    conns: Vec<Option<Conn>>,
    next_metrics: Instant,
    metrics_failing: bool,
    /// The metrics file last written, removed on a clean stop.
    metrics_written: Option<PathBuf>,
    /// The bond or first port, for the default socket path.
    name: String,
    path_change_warned: bool,
}

impl Control {
    /// Opens the control socket the settings ask for for the bond or first port `name`. A
    /// socket given explicitly (command line or configuration) that cannot be made is fatal; the
    /// default one is only warned about.
    pub fn open(
        name: &str,
        o: &ObservabilityConfig,
        registry: &Registry,
    ) -> Result<Control, Failure> {
        let mut control = Control::new(name);
        if let Some(path) = o.control_socket_for(name) {
            match control.bind(&path, registry) {
                Ok(()) => info!("control socket {}", path.display()),
                Err(e) if o.control_socket.is_some() => {
                    return Err(Failure::io(
                        &format!("control socket {}", path.display()),
                        e,
                    ))
                }
                Err(e) => warn!(
                    "control socket {}: {e}; `rlbd status` will not reach this daemon",
                    path.display()
                ),
            }
        }
        if let Some(f) = o.metrics_file_for(name) {
            info!(
                "metrics file {} every {} s",
                f.display(),
                o.metrics_interval_secs
            );
        }
        Ok(control)
    }

    pub fn new(name: &str) -> Self {
        Control {
            bound: None,
            conns: (0..MAX_CONNS).map(|_| None).collect(),
            next_metrics: Instant::now() + FIRST_METRICS,
            metrics_failing: false,
            metrics_written: None,
            name: name.to_string(),
            path_change_warned: false,
        }
    }

    /// Makes the socket at `path` (its directory too, 0755, when missing), replacing a stale
    /// socket file but not a live one nor anything else, and registers it.
    pub fn bind(&mut self, path: &Path, registry: &Registry) -> io::Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                DirBuilder::new().recursive(true).mode(0o755).create(dir)?;
                // The umask (systemd's UMask=0077) must not make it private.
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
            }
        }
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_socket() => {
                match std::os::unix::net::UnixStream::connect(path) {
                    Ok(_) => {
                        return Err(io::Error::new(
                            io::ErrorKind::AddrInUse,
                            "another process (another rlbd?) is serving it",
                        ))
                    }
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        info!("control socket {}: replacing a stale one", path.display());
                        std::fs::remove_file(path)?;
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "exists and is not a socket; not replacing it",
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let std_listener = std::os::unix::net::UnixListener::bind(path)?;
        std_listener.set_nonblocking(true)?;
        let mut listener = UnixListener::from_std(std_listener);
        let meta = std::fs::metadata(path)?;
        let id = (meta.dev(), meta.ino());
        let cleanup = |e: io::Error| {
            let _ = std::fs::remove_file(path);
            e
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).map_err(cleanup)?;
        // Root's group, when we may give it (as root); otherwise our own group stays.
        if let Err(e) = std::os::unix::fs::chown(path, None, Some(0)) {
            debug!("control socket {}: group not changed: {e}", path.display());
        }
        registry
            .register(&mut listener, CONTROL, Interest::READABLE)
            .map_err(cleanup)?;
        self.bound = Some(Bound {
            path: path.to_path_buf(),
            listener,
            id,
        });
        Ok(())
    }

    /// The socket's path, when there is one.
    pub fn path(&self) -> Option<&Path> {
        self.bound.as_ref().map(|b| b.path.as_path())
    }

    /// Handles a readiness event of the listener or a connection.
    pub fn on_event(&mut self, ev: &Event, registry: &Registry, status: &mut dyn Responder) {
        if ev.token() == CONTROL {
            self.accept(registry, status);
        } else if let Some(slot) = ev.token().0.checked_sub(CONTROL_CONN_BASE) {
            self.service(slot, registry, status);
        }
    }

    fn accept(&mut self, registry: &Registry, status: &mut dyn Responder) {
        for _ in 0..ACCEPT_BATCH {
            let Some(b) = self.bound.as_mut() else {
                return;
            };
            let mut stream = match b.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE and the like: the connection waits in the backlog; try at the
                    // next connection rather than spin.
                    warn!("control socket: cannot accept: {e}");
                    return;
                }
            };
            let Some(slot) = self.conns.iter().position(Option::is_none) else {
                debug!("control socket: {MAX_CONNS} connections open; refusing one");
                // Take what it sent already, so the close does not reset the connection before
                // the client reads why.
                let _ = stream.read(&mut [0u8; MAX_REQUEST]);
                let _ = stream.write(BUSY);
                continue;
            };
            let token = Token(CONTROL_CONN_BASE + slot);
            if let Err(e) =
                registry.register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
            {
                warn!("control socket: cannot register a connection: {e}");
                continue;
            }
            self.conns[slot] = Some(Conn {
                stream,
                request: Vec::new(),
                answer: Vec::new(),
                written: 0,
                answered: false,
                reload: false,
                deadline: Instant::now() + DEADLINE,
            });
            // The request may be in already.
            self.service(slot, registry, status);
        }
        // More may wait: re-arming makes epoll report the listener again if so.
        if let Some(b) = self.bound.as_mut() {
            if let Err(e) = registry.reregister(&mut b.listener, CONTROL, Interest::READABLE) {
                warn!("control socket: cannot re-arm the listener: {e}");
            }
        }
    }

    fn service(&mut self, slot: usize, registry: &Registry, status: &mut dyn Responder) {
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        match conn.step(status) {
            Ok(Step::Wait) => {}
            Ok(Step::Done) => self.close(slot, registry),
            Err(e) => {
                debug!("control socket: connection dropped: {e}");
                self.close(slot, registry);
            }
        }
    }

    fn close(&mut self, slot: usize, registry: &Registry) {
        if let Some(mut c) = self.conns.get_mut(slot).and_then(Option::take) {
            let _ = registry.deregister(&mut c.stream);
        }
    }

    /// Open connections.
    #[cfg(test)]
    pub fn open_connections(&self) -> usize {
        self.conns.iter().filter(|c| c.is_some()).count()
    }

    /// Called on every turn of the loop: drops connections past their deadline, and rewrites the
    /// metrics file when it is due.
    pub fn on_timer(
        &mut self,
        now: Instant,
        registry: &Registry,
        cfg: &ObservabilityConfig,
        status: &mut dyn Responder,
    ) {
        for slot in 0..self.conns.len() {
            if self.conns[slot].as_ref().is_some_and(|c| now >= c.deadline) {
                debug!(
                    "control socket: dropping a connection still open after {} s",
                    DEADLINE.as_secs()
                );
                self.close(slot, registry);
            }
        }
        if now >= self.next_metrics {
            self.next_metrics = now + Duration::from_secs(cfg.metrics_interval_secs.max(1));
            // Here rather than on every turn of the loop: it allocates.
            self.warn_if_moved(cfg);
            if let Some(path) = &cfg.metrics_file_for(&self.name) {
                let text = status.metrics();
                let written = write_atomically(path, text.as_bytes());
                if written.is_ok() {
                    self.metrics_written = Some(path.clone());
                }
                match written {
                    Ok(()) if self.metrics_failing => {
                        info!("metrics file {}: written again", path.display());
                        self.metrics_failing = false;
                    }
                    Ok(()) => {}
                    Err(e) if !self.metrics_failing => {
                        warn!("metrics file {}: {e}", path.display());
                        self.metrics_failing = true;
                    }
                    Err(e) => debug!("metrics file {}: {e}", path.display()),
                }
            }
        }
    }
}

impl Control {
    /// A clean stop (SIGTERM, SIGINT): the metrics file goes, so that a stop on purpose does not
    /// read as a daemon that died (the RlbdDown alert sees its values stop changing). Any other
    /// exit leaves the file, for that alert to fire.
    pub fn remove_metrics_file(&mut self) {
        let Some(path) = self.metrics_written.take() else {
            return;
        };
        match std::fs::remove_file(&path) {
            Ok(()) => debug!("metrics file {} removed", path.display()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => warn!("metrics file {}: cannot remove: {e}", path.display()),
        }
    }

    /// A reload (SIGHUP) cannot move the socket; says so once.
    fn warn_if_moved(&mut self, cfg: &ObservabilityConfig) {
        if self.path_change_warned || self.bound.is_none() {
            return;
        }
        let want = cfg.control_socket_for(&self.name);
        if want.as_deref() != self.path() {
            warn!(
                "the control socket is now configured as {}; restart rlbd to apply that",
                want.map_or_else(|| "none".into(), |p| p.display().to_string())
            );
            self.path_change_warned = true;
        }
    }
}

impl Drop for Control {
    /// Removes the socket file, if it is still the one this daemon made.
    fn drop(&mut self) {
        if let Some(b) = &self.bound {
            let ours = std::fs::symlink_metadata(&b.path)
                .is_ok_and(|m| (m.dev(), m.ino()) == b.id && m.file_type().is_socket());
            if ours {
                match std::fs::remove_file(&b.path) {
                    Ok(()) => debug!("control socket {} removed", b.path.display()),
                    Err(e) => warn!("control socket {}: cannot remove: {e}", b.path.display()),
                }
            }
        }
    }
}

/// Replaces `path` with `data` so a reader sees the old or the new file whole: a temporary file
/// in the same directory, fsync, rename, fsync of the directory.
pub fn write_atomically(path: &Path, data: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    // A dot file: collectors that read `*.prom` never see it half written.
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        f.write_all(data)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

mod conn;
mod reloads;

use conn::{Conn, Step};

#[cfg(test)]
mod tests;
