//! The control socket against real clients on a real Unix socket.

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
    // Every one of them moved.
    r.totals.clients_tracked = clients;
    r.totals.clients_moved = clients;
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
    status: &mut dyn Responder,
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
        &mut || report(3),
    );
    let [client] = handles;
    client.join().unwrap();
    assert_eq!(control.open_connections(), 0);
    drop(control);
    assert!(!path.exists(), "the socket is removed on exit");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_reload_is_answered_with_its_result_once_done() {
    let dir = tmpdir("reload");
    let path = dir.join("bond0.sock");
    let mut poll = Poll::new().unwrap();
    let mut control = Control::new("bond0");
    control.bind(&path, poll.registry()).unwrap();
    let p = path.clone();
    let client = std::thread::spawn(move || {
        let first = crate::statusview::reload(&p);
        let second = crate::statusview::reload(&p).unwrap_err();
        (first, second)
    });
    // The loop's turn as `Daemon::run` takes it: events, then the reload the events asked for.
    let mut events = Events::with_capacity(8);
    let mut results = vec![
        Err("configuration not reloaded: x.toml:3: policy.threshold: 2 is not in (0, 1]".into()),
        Ok("configuration reloaded from x.toml; state kept".to_string()),
    ];
    let start = Instant::now();
    while !client.is_finished() && start.elapsed() < Duration::from_secs(20) {
        match poll.poll(&mut events, Some(Duration::from_millis(50))) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => r.unwrap(),
        }
        for ev in events.iter() {
            control.on_event(ev, poll.registry(), &mut || report(1));
        }
        if control.reload_requested() {
            // Not answered before the reload is done.
            assert_eq!(control.open_connections(), 1);
            let r = results.pop().expect("two reloads asked");
            control.answer_reloads(&r, poll.registry());
            assert!(!control.reload_requested());
        }
    }
    let (first, second) = client.join().unwrap();
    assert_eq!(
        first.unwrap(),
        "configuration reloaded from x.toml; state kept"
    );
    assert_eq!(second.code, crate::exit::EX_CONFIG);
    assert!(
        second.message.ends_with(
            "configuration not reloaded: x.toml:3: policy.threshold: 2 is not in (0, 1]"
        ),
        "{}",
        second.message
    );
    assert!(results.is_empty());
    drop(control);
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
        // A slow reader: asks for a large status and reads nothing until the loop has answered
        // the two requests below.
        let mut slow = StdStream::connect(&p).unwrap();
        slow.write_all(b"status\n").unwrap();
        // Seven silent ones: with the slow one, every slot is taken.
        let silent: Vec<StdStream> = (0..7).map(|_| StdStream::connect(&p).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(300));
        // The loop answers a connection it has no slot for at once and closes it: the request
        // may meet a closed socket (EPIPE), the answer is still there to read.
        let mut s = StdStream::connect(&p).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.write_all(b"status\n");
        let refused = crate::statusview::read_answer(&mut s, 1 << 20).unwrap();
        assert_eq!(refused, BUSY);
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
        &mut || report(20_000),
    );
    let [client] = handles;
    // Blocking on the slow reader would deadlock the client's script (it reads only after the
    // loop has answered two more requests): its asserts, not a wall-clock bound that a loaded
    // machine can break, are what prove the loop never waits on a socket.
    client.join().unwrap();
    println!("longest control event: {longest:?} (rendering 20,000 clients)");
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

/// The metrics text has the sample of rlbd_clients_moved with value `n`.
fn moved(text: &str, n: usize) -> bool {
    text.lines()
        .any(|l| l.starts_with("rlbd_clients_moved{") && l.ends_with(&format!("}} {n}")))
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
    control.on_timer(t0, poll.registry(), &cfg, &mut || report(1));
    assert!(!file.exists(), "not before the first rates are in");
    control.on_timer(t0 + FIRST_METRICS, poll.registry(), &cfg, &mut || report(1));
    let first = std::fs::read_to_string(&file).unwrap();
    assert!(moved(&first, 1), "{first}");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o644
    );
    control.on_timer(
        t0 + FIRST_METRICS + Duration::from_secs(4),
        poll.registry(),
        &cfg,
        &mut || report(2),
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
        &mut || report(2),
    );
    assert!(moved(&std::fs::read_to_string(&file).unwrap(), 2));
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
    control.on_timer(
        t0 + Duration::from_secs(60),
        poll.registry(),
        &bad,
        &mut || report(1),
    );
    assert!(control.metrics_failing);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_clean_stop_removes_the_metrics_file_it_wrote_and_nothing_else() {
    let dir = tmpdir("metrics-stop");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rlbd.prom");
    let poll = Poll::new().unwrap();
    let cfg = ObservabilityConfig {
        metrics_file: Some(file.clone()),
        ..Default::default()
    };
    // Not written yet (stopped within FIRST_METRICS): a file there is not this daemon's.
    std::fs::write(&file, "someone else's\n").unwrap();
    let mut control = Control::new("bond0");
    control.remove_metrics_file();
    assert!(file.exists());
    let t0 = Instant::now();
    control.on_timer(t0 + FIRST_METRICS, poll.registry(), &cfg, &mut || report(1));
    assert!(moved(&std::fs::read_to_string(&file).unwrap(), 1));
    control.remove_metrics_file();
    assert!(!file.exists());
    // Twice, or after someone removed it: nothing to say.
    control.remove_metrics_file();
    std::fs::remove_dir_all(&dir).unwrap();
}
