//! A spoofed-source flood against the daemon (root): one million frames from one million made-up
//! source MACs and addresses, sent from a client namespace to p0's MAC while `rlbd run` watches
//! the lab's two ports. Afterwards the daemon must be alive, its client table at its bound (with
//! evictions), no ARP update sent to any of the made-up sources (by its own counter, and on the
//! wire as seen from the client's namespace), and its memory flat.
//!
//! Without root the test prints "skipped: needs root" and passes, unless `CI=true` or
//! `RLBD_REQUIRE_ROOT_TESTS=1` is set, in which case not being root fails it. Run with
//! `--nocapture` to see the figures.

#[macro_use]
mod common;

use common::{exe, lab_exe, root_or_skip};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rlbd::capture::{parse, CaptureSocket, Frame, Mac, RingConfig, PACKET_OUTGOING};
use rlbd::status::StatusReport;
use rlbd_lab::flood::{parse_mac, FloodReport};
use rlbd_lab::netns::{run_cmd, Lab, LabResult, PORTS, SERVER_IP};
use rlbd_lab::scenario::start_daemon;

/// The lab's per-port cap and the capacity given to the daemon, Mbit/s.
const CAP: u32 = 1000;
const FRAMES: u64 = 1_000_000;
const SOURCES: u32 = 1_000_000;
/// The client the flood comes from.
const FROM: &str = "c1";
const FROM_MAC: Mac = Mac(0x02, 0x00, 0xc6, 0x12, 0x00, 0x01);
const FROM_IP: [u8; 4] = [198, 18, 0, 11];
/// Most the daemon's resident memory may grow from before the flood to during or after it.
const RSS_GROWTH_LIMIT_KB: u64 = 8 * 1024;

#[test]
fn spoofed_source_flood_keeps_the_daemon_bounded_and_silent() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::build(CAP).expect("building the lab");
    let prefix = lab.prefix().to_string();
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let log = tmp.join(format!("{prefix}-flood-rlbd.log"));
    let sock = tmp.join(format!("{prefix}-flood.sock"));
    let _ = std::fs::remove_file(&log);
    let result = scenario(&lab, &log, &sock);
    drop(lab);
    common::conclude("flood", &prefix, &log, result);
}

/// VmRSS of a process, in KiB.
fn rss_kb(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

fn status(sock: &Path) -> LabResult<StatusReport> {
    let out = run_cmd(&[
        &exe().to_string_lossy(),
        "status",
        "--json",
        "--socket",
        &sock.to_string_lossy(),
    ])?;
    serde_json::from_str(&out).map_err(|e| format!("rlbd status --json: {e}: {out:.200}"))
}

fn wait_for_status(lab: &Lab, sock: &Path, daemon: &mut std::process::Child) -> LabResult<()> {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(st) = daemon.try_wait().map_err(|e| e.to_string())? {
            return Err(format!("rlbd run exited at start ({st})"));
        }
        if sock.exists() && status(sock).is_ok() {
            return Ok(());
        }
        if Instant::now() > end {
            return Err("rlbd run's control socket does not answer after 10 s".into());
        }
        lab.sleep(Duration::from_millis(100))?;
    }
}

fn rx_packets(lab: &Lab, port: &str) -> LabResult<u64> {
    let out = lab.exec_in(
        "srv",
        &[
            "cat",
            &format!("/sys/class/net/{port}/statistics/rx_packets"),
        ],
    )?;
    out.trim()
        .parse()
        .map_err(|_| format!("rx_packets of {port}: {out:?}"))
}

/// ARP frames from the server's ports, as seen on the client's interface.
#[derive(Debug, Default, Clone, Copy)]
struct ArpSeen {
    /// Every ARP frame from a server port MAC.
    from_server: u64,
    /// Of those, replies (what a steering update is).
    replies: u64,
    /// Of those, addressed to a MAC other than the client's own (the made-up sources).
    to_others: u64,
}

/// Counts ARP frames from `server_macs` on `eth0` of namespace `ns` (an AF_PACKET socket whose
/// filter passes only ARP, opened by a thread that joined the namespace) until `stop`; then, as
/// a check that the counter works, asks the server for its address from the client and counts
/// the replies. Returns (during the flood, replies to the probe).
fn arp_watch(
    ns: String,
    server_macs: Vec<Mac>,
    stop: Arc<AtomicBool>,
    ready: mpsc::Sender<Result<(), String>>,
) -> Result<(ArpSeen, u64), String> {
    let netns = File::open(format!("/run/netns/{ns}")).map_err(|e| format!("open {ns}: {e}"))?;
    // SAFETY: setns moves only this thread into the namespace; the descriptor is live.
    if unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        let e = format!("setns({ns}): {}", std::io::Error::last_os_error());
        let _ = ready.send(Err(e.clone()));
        return Err(e);
    }
    let cfg = RingConfig {
        block_size: 1 << 16,
        block_count: 4,
        retire_timeout_ms: 10,
        ..RingConfig::default()
    };
    let mut sock = match CaptureSocket::open_by_name("eth0", &[], &cfg) {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(e.to_string()));
            return Err(e.to_string());
        }
    };
    let _ = ready.send(Ok(()));
    let mut seen = ArpSeen::default();
    let count = |sock: &mut CaptureSocket, seen: &mut ArpSeen| {
        sock.drain(usize::MAX, |meta, bytes| {
            if meta.pkt_type == PACKET_OUTGOING {
                return;
            }
            if let Some(Frame::Arp {
                eth_src,
                eth_dst,
                op,
                ..
            }) = parse(bytes)
            {
                if server_macs.contains(&eth_src) {
                    seen.from_server += 1;
                    seen.replies += u64::from(op == 2);
                    seen.to_others += u64::from(eth_dst != FROM_MAC && eth_dst != [0xff; 6]);
                }
            }
        });
    };
    while !stop.load(Ordering::Relaxed) {
        count(&mut sock, &mut seen);
        std::thread::sleep(Duration::from_millis(5));
    }
    count(&mut sock, &mut seen);
    let during = seen;
    // The probe: a broadcast "who has SERVER_IP, tell FROM_IP" from the client's MAC.
    let mut req = vec![0u8; 60];
    req[0..6].copy_from_slice(&[0xff; 6]);
    req[6..12].copy_from_slice(&FROM_MAC.octets());
    req[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    req[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    req[22..28].copy_from_slice(&FROM_MAC.octets());
    req[28..32].copy_from_slice(&FROM_IP);
    let server: std::net::Ipv4Addr = SERVER_IP.parse().expect("server address");
    req[38..42].copy_from_slice(&server.octets());
    sock.send(&req).map_err(|e| format!("probe: {e}"))?;
    let end = Instant::now() + Duration::from_secs(2);
    while Instant::now() < end && seen.replies == during.replies {
        count(&mut sock, &mut seen);
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(100));
    count(&mut sock, &mut seen);
    Ok((during, seen.replies - during.replies))
}

/// Samples a process's VmRSS every 100 ms until `stop`; returns the largest.
fn rss_sampler(pid: u32, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(u64, usize)> {
    std::thread::spawn(move || {
        let (mut max, mut n) = (0, 0);
        while !stop.load(Ordering::Relaxed) {
            if let Some(kb) = rss_kb(pid) {
                max = max.max(kb);
                n += 1;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        (max, n)
    })
}

/// Runs the flood; returns the failed checks (an `Err` when the scenario cannot go on at all).
fn scenario(lab: &Lab, log: &Path, sock: &Path) -> LabResult<Vec<String>> {
    let mut failures = Vec::new();
    let port_macs = prepare_switch(lab)?;
    let (mut daemon, rss0) = start_and_settle(lab, log, sock)?;
    let pid = daemon.id();
    let (stop_watch, watcher) = start_arp_watch(lab, port_macs)?;
    let stop_rss = Arc::new(AtomicBool::new(false));
    let sampler = rss_sampler(pid, Arc::clone(&stop_rss));
    let t = Instant::now();
    let (flood, at_p0) = flood(lab)?;
    stop_rss.store(true, Ordering::Relaxed);
    let (rss_during, samples) = sampler.join().map_err(|_| "RSS sampler panicked")?;
    let rss_after = rss_kb(pid).unwrap_or(0);
    let alive = daemon.try_wait().map_err(|e| e.to_string())?.is_none();
    let st1 = if alive { Some(status(sock)?) } else { None };
    stop_watch.store(true, Ordering::Relaxed);
    let (arp, probe_replies) = watcher
        .join()
        .map_err(|_| "the ARP watcher panicked".to_string())??;
    let elapsed = t.elapsed().as_secs_f64();
    say!(
        "daemon alive after the flood: {alive}; VmRSS before {:.1} MB, largest of {samples} \
         samples during and after {:.1} MB, after {:.1} MB",
        rss0 as f64 / 1024.0,
        rss_during as f64 / 1024.0,
        rss_after as f64 / 1024.0
    );
    if !alive {
        failures.push("the daemon exited during the flood".into());
    }
    check_delivery(&flood, at_p0, &mut failures);
    if let Some(st) = &st1 {
        check_status(st, log, &mut failures);
    }
    check_wire(&arp, probe_replies, &mut failures);
    let growth = rss_during.max(rss_after).saturating_sub(rss0);
    check_growth(growth, elapsed, &mut failures);
    let status = lab.stop_child(&mut daemon, Duration::from_secs(3))?;
    say!("rlbd stopped: {status}");
    Ok(failures)
}

/// Turns learning off on the flooding client's switch port; returns the lab ports' MACs.
fn prepare_switch(lab: &Lab) -> LabResult<Vec<Mac>> {
    // The switch port of the flooding client learns no source MACs: a million of them would
    // fill the bridge's (unbounded) forwarding table and slow every frame. (A real switch's
    // table is bounded; that is the switch's problem, not the server's.)
    run_cmd(&[
        "bridge",
        "-n",
        &lab.ns("sw"),
        "link",
        "set",
        "dev",
        &format!("s-{FROM}"),
        "learning",
        "off",
    ])?;
    PORTS
        .iter()
        .map(|p| {
            let m = lab.port_mac(p)?;
            parse_mac(&m).ok_or_else(|| format!("bad MAC {m:?} of {p}"))
        })
        .collect::<LabResult<_>>()
}

/// Starts the daemon, waits for its status and lets it settle; returns it and its VmRSS (KiB)
/// before the flood.
fn start_and_settle(lab: &Lab, log: &Path, sock: &Path) -> LabResult<(Child, u64)> {
    let sock_arg = sock.to_string_lossy().into_owned();
    let mut daemon = start_daemon(lab, exe(), log, &["--control-socket", &sock_arg, "-v"])?;
    let pid = daemon.id();
    wait_for_status(lab, sock, &mut daemon)?;
    lab.sleep(Duration::from_millis(1500))?;
    let st0 = status(sock)?;
    let rss0 = rss_kb(pid).ok_or("cannot read the daemon's VmRSS")?;
    say!(
        "before: daemon pid {pid} VmRSS {:.1} MB; clients tracked {} of {}, evictions {}, updates \
         sent {}",
        rss0 as f64 / 1024.0,
        st0.totals.clients_tracked,
        st0.totals.table_capacity,
        st0.totals.table_evictions,
        st0.totals.updates_sent
    );
    Ok((daemon, rss0))
}

/// What the ARP watcher returns: the replies seen during the flood, and to the probe after it.
type ArpWatch = JoinHandle<Result<(ArpSeen, u64), String>>;

/// Starts [`arp_watch`] in the flooding client's namespace and waits until it listens; returns
/// the flag that stops it, and the thread.
fn start_arp_watch(lab: &Lab, port_macs: Vec<Mac>) -> LabResult<(Arc<AtomicBool>, ArpWatch)> {
    let stop_watch = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let watcher = {
        let ns = lab.ns(FROM);
        let stop = Arc::clone(&stop_watch);
        std::thread::spawn(move || arp_watch(ns, port_macs, stop, ready_tx))
    };
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .map_err(|_| "the ARP watcher did not start".to_string())??;
    Ok((stop_watch, watcher))
}

/// The daemon's memory stayed flat: VmRSS grew (KiB) less than [`RSS_GROWTH_LIMIT_KB`].
fn check_growth(growth: u64, elapsed: f64, failures: &mut Vec<String>) {
    say!(
        "daemon VmRSS growth: {:.2} MB (limit {} MB); flood phase took {elapsed:.1} s",
        growth as f64 / 1024.0,
        RSS_GROWTH_LIMIT_KB / 1024
    );
    if growth >= RSS_GROWTH_LIMIT_KB {
        failures.push(format!(
            "daemon VmRSS grew by {:.1} MB",
            growth as f64 / 1024.0
        ));
    }
}

/// The flood itself, from `FROM` at p0's MAC, and the frames p0 received meanwhile (with two
/// ticks after it, so that roll-overs and evaluations run on the flooded table).
fn flood(lab: &Lab) -> LabResult<(FloodReport, u64)> {
    let rx0 = rx_packets(lab, PORTS[0])?;
    let exe_s = lab_exe().to_string_lossy().into_owned();
    let dst_mac = lab.port_mac(PORTS[0])?;
    let (count, sources) = (FRAMES.to_string(), SOURCES.to_string());
    let mut sender = lab.spawn_in(
        FROM,
        &[
            &exe_s,
            "flood",
            "--iface",
            "eth0",
            "--dst-mac",
            &dst_mac,
            "--count",
            &count,
            "--sources",
            &sources,
            "--random",
            "--sizes",
            "64",
        ],
    )?;
    if lab
        .wait_child(&mut sender, Duration::from_secs(120))?
        .is_none()
    {
        lab.stop_child(&mut sender, Duration::from_millis(500))?;
        return Err("the flooder did not finish within 120 s".into());
    }
    let out = sender.wait_with_output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let flood = FloodReport::from_output(&text)
        .ok_or_else(|| format!("the flooder printed {:?} ({})", text.trim(), out.status))?;
    say!(
        "flood from {FROM}: {} frames sent ({} refused) from {SOURCES} random sources in {:.2} s \
         ({:.0} frames/s), sender CPU {:.0} ns/frame",
        flood.sent,
        flood.failed,
        flood.secs,
        flood.sent as f64 / flood.secs.max(1e-9),
        flood.cpu_ns as f64 / flood.sent.max(1) as f64
    );
    lab.sleep(Duration::from_millis(2500))?;
    let at_p0 = rx_packets(lab, PORTS[0])?.saturating_sub(rx0);
    say!("frames arriving at p0 during the flood: {at_p0}");
    Ok((flood, at_p0))
}

/// The flood was sent, and reached the server.
fn check_delivery(flood: &FloodReport, at_p0: u64, failures: &mut Vec<String>) {
    if flood.sent < FRAMES * 9 / 10 {
        failures.push(format!(
            "the flood sent only {} of {FRAMES} frames",
            flood.sent
        ));
    }
    if at_p0 < flood.sent / 2 {
        failures.push(format!(
            "only {at_p0} of {} frames reached p0: the flood did not really hit the server",
            flood.sent
        ));
    }
}

/// The daemon's own account after the flood: its table bounded and evicting, no update sent,
/// a full counting map shown and warned about once an episode.
fn check_status(st: &rlbd::status::StatusReport, log: &Path, failures: &mut Vec<String>) {
    let t = &st.totals;
    let p0 = st.ports.iter().find(|p| p.name == PORTS[0]);
    say!(
        "after: clients tracked {} of {} (table capacity), evictions {}, expirations {}, \
         updates sent {}, suppressed {}, moves {}+{}; p0 ring packets {}, ring drops {}",
        t.clients_tracked,
        t.table_capacity,
        t.table_evictions,
        t.table_expirations,
        t.updates_sent,
        t.updates_suppressed,
        t.moves_overload,
        t.moves_failover,
        p0.map_or(0, |p| p.ring_packets),
        p0.map_or(0, |p| p.ring_drops)
    );
    if t.clients_tracked > t.table_capacity {
        failures.push(format!(
            "{} clients tracked in a table of {}",
            t.clients_tracked, t.table_capacity
        ));
    }
    if t.table_evictions == 0 {
        failures.push("no table evictions after a million new sources".into());
    }
    if t.updates_sent != 0 {
        failures.push(format!(
            "{} ARP updates sent during a flood of spoofed sources",
            t.updates_sent
        ));
    }
    // Counting in the kernel, a million sources overflow the slot table: the frames no slot
    // took are counted apart, shown, and warned about once per episode.
    if let Some(p) = p0.filter(|p| p.counting == rlbd::status::Counting::Ebpf) {
        let warned = std::fs::read_to_string(log)
            .unwrap_or_default()
            .matches("the counting map is full")
            .count();
        say!(
            "p0 counts in the kernel: {} frames given to no client, {warned} warning(s)",
            p.uncounted_frames
        );
        // Once per episode: one flood is one episode, or a few if it paused.
        if p.uncounted_frames == 0 || !(1..=3).contains(&warned) {
            failures.push(format!(
                "a full counting map: {} uncounted frames shown, {warned} warnings (want > 0 \
                 and 1-3)",
                p.uncounted_frames
            ));
        }
    }
}

/// Nothing from the server on the wire during the flood, and the counter itself working.
fn check_wire(arp: &ArpSeen, probe_replies: u64, failures: &mut Vec<String>) {
    say!(
        "ARP frames from the server seen in {FROM}: {} ({} replies, {} to other MACs); the \
         counter's own check (an ARP request from {FROM} afterwards) got {probe_replies} reply(ies)",
        arp.from_server,
        arp.replies,
        arp.to_others
    );
    if arp.from_server != 0 {
        failures.push(format!(
            "{} ARP frames from the server on the wire during the flood ({} replies)",
            arp.from_server, arp.replies
        ));
    }
    if probe_replies == 0 {
        failures.push("the on-wire ARP counter saw no reply to its own probe".into());
    }
}
