//! The control socket (`/run/rlbd/NAME.sock`) and the metrics file, served by the daemon's own
//! event loop.
//!
//! One request per connection: the client sends one line, `status` or `metrics`, and gets the
//! status report as one line of JSON or the Prometheus text; then the daemon closes the
//! connection (see `crate::statusview` for the client). Nothing here may block the loop: the
//! listener and every connection are nonblocking, a request is at most
//! [`MAX_REQUEST`](crate::statusview::MAX_REQUEST) bytes, an answer is written as far as the
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
use mio::net::{UnixListener, UnixStream};
use mio::{Interest, Registry, Token};

use super::setup::Fatal;
use super::{Daemon, CONTROL, CONTROL_CONN_BASE};
use crate::config::{ObservabilityConfig, Target};
use crate::status::StatusReport;
use crate::statusview::MAX_REQUEST;

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

struct Conn {
    stream: UnixStream,
    request: Vec<u8>,
    answer: Vec<u8>,
    written: usize,
    answered: bool,
    deadline: Instant,
}

/// What a connection needs next.
enum Step {
    Wait,
    Done,
}

impl Conn {
    /// Reads the request (once it is complete, answers it) and writes what the socket takes.
    fn step(&mut self, status: &dyn Fn() -> StatusReport) -> io::Result<Step> {
        if !self.answered {
            let mut eof = false;
            let mut buf = [0u8; 512];
            while !self.request.contains(&b'\n') && self.request.len() <= MAX_REQUEST {
                match self.stream.read(&mut buf) {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(n) => self.request.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            let line = match self.request.iter().position(|b| *b == b'\n') {
                Some(i) if i < MAX_REQUEST => Some(&self.request[..i]),
                Some(_) => None,
                None if self.request.len() >= MAX_REQUEST => None,
                None if eof && !self.request.is_empty() => Some(&self.request[..]),
                None if eof => return Ok(Step::Done),
                None => return Ok(Step::Wait),
            };
            self.answer = match line {
                Some(l) => answer(l, status),
                None => format!("error: request longer than {MAX_REQUEST} bytes\n").into_bytes(),
            };
            self.answered = true;
        }
        while self.written < self.answer.len() {
            match self.stream.write(&self.answer[self.written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Step::Wait),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Step::Done)
    }
}

/// The answer to one request line.
fn answer(line: &[u8], status: &dyn Fn() -> StatusReport) -> Vec<u8> {
    let text = String::from_utf8_lossy(line);
    match text.trim() {
        "status" => match serde_json::to_vec(&status()) {
            Ok(mut v) => {
                v.push(b'\n');
                v
            }
            Err(e) => format!("error: cannot render the status: {e}\n").into_bytes(),
        },
        "metrics" => crate::metrics::render(&status()).into_bytes(),
        "" => b"error: empty request; send `status` or `metrics`\n".to_vec(),
        other => {
            let shown: String = other.chars().take(40).collect();
            format!("error: unknown request {shown:?}; send `status` or `metrics`\n").into_bytes()
        }
    }
}

/// The control socket with its connections, and the metrics file's timer.
pub struct Control {
    bound: Option<Bound>,
    conns: Vec<Option<Conn>>,
    next_metrics: Instant,
    metrics_failing: bool,
    /// The bond or first port, for the default socket path.
    name: String,
    path_change_warned: bool,
}

impl Daemon {
    /// Opens the control socket the settings ask for. A socket given explicitly (command line or
    /// configuration) that cannot be made is fatal; the default one is only warned about.
    pub(super) fn open_control(&self) -> Result<Control, Fatal> {
        let name = match &self.ports.target {
            Target::Bond(b) => b.clone(),
            Target::Ports(p) => p.first().cloned().unwrap_or_default(),
        };
        let o = &self.settings.observability;
        let mut control = Control::new(&name);
        if let Some(path) = o.control_socket_for(&name) {
            match control.bind(&path, self.poll.registry()) {
                Ok(()) => info!("control socket {}", path.display()),
                Err(e) if o.control_socket.is_some() => {
                    return Err(Fatal::io(&format!("control socket {}", path.display()), e))
                }
                Err(e) => warn!(
                    "control socket {}: {e}; `rlbd status` will not reach this daemon",
                    path.display()
                ),
            }
        }
        if let Some(f) = &o.metrics_file {
            info!(
                "metrics file {} every {} s",
                f.display(),
                o.metrics_interval_secs
            );
        }
        Ok(control)
    }
}

impl Control {
    pub fn new(name: &str) -> Self {
        Control {
            bound: None,
            conns: (0..MAX_CONNS).map(|_| None).collect(),
            next_metrics: Instant::now() + FIRST_METRICS,
            metrics_failing: false,
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
    pub fn on_event(&mut self, ev: &Event, registry: &Registry, status: &dyn Fn() -> StatusReport) {
        if ev.token() == CONTROL {
            self.accept(registry, status);
        } else if let Some(slot) = ev.token().0.checked_sub(CONTROL_CONN_BASE) {
            self.service(slot, registry, status);
        }
    }

    fn accept(&mut self, registry: &Registry, status: &dyn Fn() -> StatusReport) {
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

    fn service(&mut self, slot: usize, registry: &Registry, status: &dyn Fn() -> StatusReport) {
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
        status: &dyn Fn() -> StatusReport,
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
            if let Some(path) = &cfg.metrics_file {
                let text = crate::metrics::render(&status());
                match write_atomically(path, text.as_bytes()) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::SCHEMA_VERSION;
    use mio::{Events, Poll};
    use std::os::unix::net::UnixStream as StdStream;
    use std::thread::JoinHandle;

    fn report(clients: usize) -> StatusReport {
        let mut r = crate::metrics::tests::sample_report();
        let c = r.clients[0].clone();
        r.clients = (0..clients)
            .map(|i| {
                let mut c = c.clone();
                c.ip = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
                c
            })
            .collect();
        r
    }

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rlbd-ctl-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// Runs the control socket's share of a daemon loop until every client thread is done (or
    /// `limit` passes), the way `Daemon::run` does: events, then the timer.
    fn drive(
        poll: &mut Poll,
        control: &mut Control,
        clients: &[JoinHandle<()>],
        limit: Duration,
        status: &dyn Fn() -> StatusReport,
    ) -> Duration {
        let cfg = ObservabilityConfig::default();
        let mut events = Events::with_capacity(64);
        let start = Instant::now();
        let mut longest = Duration::ZERO;
        while start.elapsed() < limit && !clients.iter().all(JoinHandle::is_finished) {
            // A signal to the test process (the harness, a child exiting) interrupts the wait.
            match poll.poll(&mut events, Some(Duration::from_millis(50))) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => r.unwrap(),
            }
            for ev in events.iter() {
                assert!(owns(ev.token()));
                let t = Instant::now();
                control.on_event(ev, poll.registry(), status);
                longest = longest.max(t.elapsed());
            }
            control.on_timer(Instant::now(), poll.registry(), &cfg, status);
        }
        longest
    }

    fn ask(path: &Path, request: &[u8]) -> String {
        let mut s = StdStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(request).unwrap();
        let got = crate::statusview::read_answer(&mut s, 1 << 30).unwrap();
        String::from_utf8(got).unwrap()
    }

    #[test]
    fn answers_status_metrics_and_bad_requests() {
        let dir = tmpdir("answers");
        let path = dir.join("sub/bond0.sock");
        let mut poll = Poll::new().unwrap();
        let mut control = Control::new("bond0");
        control.bind(&path, poll.registry()).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&path), 0o660);
        assert_eq!(mode(&dir.join("sub")), 0o755);
        let p = path.clone();
        let client = std::thread::spawn(move || {
            let json = ask(&p, b"status\n");
            let r: StatusReport = serde_json::from_str(&json).unwrap();
            assert_eq!(r.schema, SCHEMA_VERSION);
            assert_eq!(r.clients.len(), 3);
            let m = ask(&p, b"  metrics \n");
            assert!(m.contains("# TYPE rlbd_moves_total counter"), "{m}");
            // No newline, then end of file: still one request.
            let mut s = StdStream::connect(&p).unwrap();
            s.write_all(b"status").unwrap();
            s.shutdown(std::net::Shutdown::Write).unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            assert!(out.starts_with('{'), "{out}");
            let e = ask(&p, b"shutdown\n");
            assert!(e.starts_with("error: unknown request \"shutdown\""), "{e}");
            let e = ask(&p, &[b'x'; 300]);
            assert!(e.starts_with("error: request longer than 256"), "{e}");
            let e = ask(&p, b"\n");
            assert!(e.starts_with("error: empty request"), "{e}");
        });
        let handles = [client];
        drive(
            &mut poll,
            &mut control,
            &handles,
            Duration::from_secs(20),
            &|| report(3),
        );
        let [client] = handles;
        client.join().unwrap();
        assert_eq!(control.open_connections(), 0);
        drop(control);
        assert!(!path.exists(), "the socket is removed on exit");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn silent_and_slow_clients_neither_block_nor_hold_slots() {
        let dir = tmpdir("slow");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p0.sock");
        let mut poll = Poll::new().unwrap();
        let mut control = Control::new("p0");
        control.bind(&path, poll.registry()).unwrap();
        let p = path.clone();
        let client = std::thread::spawn(move || {
            // A slow reader: asks for a large status and reads nothing for 3 s.
            let mut slow = StdStream::connect(&p).unwrap();
            slow.write_all(b"status\n").unwrap();
            // Seven silent ones: with the slow one, every slot is taken.
            let silent: Vec<StdStream> = (0..7).map(|_| StdStream::connect(&p).unwrap()).collect();
            std::thread::sleep(Duration::from_millis(300));
            let refused = ask(&p, b"status\n");
            assert_eq!(refused.as_bytes(), BUSY);
            // Past the deadline every slot is free again and the next client is served.
            std::thread::sleep(Duration::from_millis(2800));
            let ok = ask(&p, b"metrics\n");
            assert!(ok.contains("rlbd_info"), "{ok}");
            let mut got = Vec::new();
            let _ = slow.read_to_end(&mut got);
            assert!(
                serde_json::from_slice::<StatusReport>(&got).is_err(),
                "the slow reader was cut off, not served whole ({} bytes)",
                got.len()
            );
            for mut s in silent {
                let mut b = Vec::new();
                assert_eq!(s.read_to_end(&mut b).unwrap(), 0, "dropped without a word");
            }
        });
        let handles = [client];
        let longest = drive(
            &mut poll,
            &mut control,
            &handles,
            Duration::from_secs(20),
            &|| report(20_000),
        );
        let [client] = handles;
        client.join().unwrap();
        assert!(
            longest < Duration::from_millis(500),
            "one event took {longest:?}"
        );
        drop(control);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn replaces_a_stale_socket_but_not_a_live_one_nor_a_file() {
        let dir = tmpdir("stale");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bond0.sock");
        let poll = Poll::new().unwrap();
        // Stale: bound, then its listener closed.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let mut a = Control::new("bond0");
        a.bind(&path, poll.registry()).unwrap();
        let mut b = Control::new("bond0");
        let e = b.bind(&path, poll.registry()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        drop(b);
        assert!(path.exists(), "a failed bind leaves the live socket alone");
        drop(a);
        assert!(!path.exists());
        std::fs::write(&path, "data").unwrap();
        let e = Control::new("bond0")
            .bind(&path, poll.registry())
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "data");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn metrics_file_is_replaced_whole_on_the_timer() {
        let dir = tmpdir("metrics");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("rlbd.prom");
        let poll = Poll::new().unwrap();
        let mut control = Control::new("bond0");
        let cfg = ObservabilityConfig {
            metrics_file: Some(file.clone()),
            metrics_interval_secs: 5,
            ..Default::default()
        };
        let t0 = Instant::now();
        control.on_timer(t0, poll.registry(), &cfg, &|| report(1));
        assert!(!file.exists(), "not before the first rates are in");
        control.on_timer(t0 + FIRST_METRICS, poll.registry(), &cfg, &|| report(1));
        let first = std::fs::read_to_string(&file).unwrap();
        assert!(first.contains("rlbd_clients_moved 1"), "{first}");
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o644
        );
        control.on_timer(
            t0 + FIRST_METRICS + Duration::from_secs(4),
            poll.registry(),
            &cfg,
            &|| report(2),
        );
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            first,
            "not yet due"
        );
        control.on_timer(
            t0 + FIRST_METRICS + Duration::from_secs(5),
            poll.registry(),
            &cfg,
            &|| report(2),
        );
        assert!(std::fs::read_to_string(&file)
            .unwrap()
            .contains("rlbd_clients_moved 2"));
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("rlbd.prom")]);
        // An unwritable place is reported, not fatal.
        let bad = ObservabilityConfig {
            metrics_file: Some(dir.join("no/such/dir/x.prom")),
            ..cfg
        };
        control.on_timer(t0 + Duration::from_secs(60), poll.registry(), &bad, &|| {
            report(1)
        });
        assert!(control.metrics_failing);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
