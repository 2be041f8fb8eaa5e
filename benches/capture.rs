//! Capture hot path costs: parsing a captured frame, accounting it in the client table (hits,
//! and misses that evict under a flood of new MACs), and the once-a-second roll-over.
//!
//! Under `cargo bench` (root) a namespace benchmark follows the micro-benchmarks (see `ns`): a
//! real flood over a veth, counted by rlbd's capture path and by a naive pnet_datalink receiver.
//! `cargo test` (which runs this binary without `--bench`) never runs it. `RLBD_BENCH_NS=0`
//! skips it, `RLBD_BENCH_NS=only` runs only it.

use std::hint::black_box;
use std::net::Ipv4Addr;

use criterion::{criterion_group, BenchmarkId, Criterion};
use rlbd::capture::{parse, ClientTable, Frame, Mac};

fn mac(i: u32) -> Mac {
    let b = i.to_be_bytes();
    Mac::from([0x02, 0x00, b[0], b[1], b[2], b[3]])
}

/// A 96-byte capture (snap length) of an IPv4 frame from `src` to the server.
fn frame(src: Mac) -> Vec<u8> {
    let mut f = vec![0u8; 96];
    f[0..6].copy_from_slice(&[0x02, 0xaa, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&src.octets());
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[26..30].copy_from_slice(&[198, 18, 1, 2]);
    f[30..34].copy_from_slice(&[198, 18, 0, 1]);
    f
}

fn account_frame(t: &mut ClientTable, f: &[u8], tick: u64) {
    if let Some(Frame::Ipv4 {
        src_mac,
        src_ip,
        dst_ip,
        ..
    }) = parse(f)
    {
        t.account(src_mac, src_ip, dst_ip, 1, 1514, tick);
    }
}

fn bench(c: &mut Criterion) {
    let f = frame(mac(7));
    c.bench_function("parse ipv4 (96-byte capture)", |b| {
        b.iter(|| parse(black_box(&f)))
    });

    let mut g = c.benchmark_group("parse + account");
    for &(cap, clients) in &[(4096usize, 1000u32), (65_536, 50_000)] {
        let frames: Vec<Vec<u8>> = (0..clients).map(|i| frame(mac(i))).collect();
        let mut t = ClientTable::new(cap, 60);
        let mut i = 0usize;
        g.bench_with_input(
            BenchmarkId::new("hit", format!("{cap}/{clients}")),
            &cap,
            |b, _| {
                b.iter(|| {
                    account_frame(&mut t, &frames[i % frames.len()], 0);
                    i += 1;
                })
            },
        );
    }
    // Every frame from a new MAC in a full table: lookup miss + eviction + insert.
    let mut t = ClientTable::new(65_536, 60);
    let mut n = 0u32;
    g.bench_function("miss+evict 65536", |b| {
        b.iter(|| {
            n = n.wrapping_add(1);
            t.account(
                mac(n),
                Ipv4Addr::new(198, 18, 1, 2),
                Ipv4Addr::new(198, 18, 0, 1),
                0,
                60,
                0,
            );
        })
    });
    g.finish();

    let mut t = ClientTable::new(65_536, 1 << 40);
    for i in 0..65_536 {
        t.account(
            mac(i),
            Ipv4Addr::new(198, 18, 1, 2),
            Ipv4Addr::new(198, 18, 0, 1),
            0,
            1514,
            0,
        );
    }
    let mut tick = 0;
    c.bench_function("roll_over 65536 live", |b| {
        b.iter(|| {
            tick += 1;
            t.roll_over(tick);
        })
    });
}

criterion_group!(benches, bench);

/// `cargo test --all-targets -- ARGS` hands the libtest ARGS to this binary too; criterion's
/// parser rejects these. Returns the arguments without them, if there were any.
fn without_libtest_args(args: &[String]) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut changed = false;
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--test-threads" | "--skip" => {
                changed = true;
                it.next();
            }
            "--include-ignored" | "-q" => changed = true,
            s if s.starts_with("--test-threads=") || s.starts_with("--skip=") => changed = true,
            _ => out.push(a.clone()),
        }
    }
    changed.then_some(out)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(ns::ROLE_ARG) {
        std::process::exit(ns::role_main(&args[2..]));
    }
    if !args.iter().any(|a| a == "--bench") {
        if let Some(rest) = without_libtest_args(&args) {
            use std::os::unix::process::CommandExt;
            // criterion reads the process's own arguments: run again without those.
            let e = std::process::Command::new(std::env::current_exe().expect("own path"))
                .args(rest)
                .exec();
            eprintln!("cannot re-run the benchmark binary: {e}");
            std::process::exit(2);
        }
    }
    let mode = std::env::var("RLBD_BENCH_NS").unwrap_or_default();
    if mode != "only" {
        benches();
        criterion::Criterion::default()
            .configure_from_args()
            .final_summary();
    }
    // `cargo bench` passes --bench; `cargo test --all-targets` does not.
    if args.iter().any(|a| a == "--bench") && mode != "0" {
        ns::main();
    }
}

/// The namespace benchmark. Two namespaces joined by a veth (`tx0` - `rx0`); a sender
/// (`rlbd-lab flood`, raw AF_PACKET + `sendmmsg`, pre-built frames) pinned to one CPU in the
/// first, and in the second, pinned to the other CPU and one at a time: rlbd's capture path
/// (`CaptureSocket` with the real filter, `parse`, `ClientTable::account`, a roll-over every
/// second: the daemon's loop without netlink) or a naive `pnet_datalink` receiver (one
/// `recv` per frame, a full copy, a `HashMap` per sender). The receivers are this binary again,
/// started with `ip netns exec` and a role argument.
///
/// On a veth the receive side of the kernel (the filter, the copy into the ring or the socket
/// queue) runs on the sender's CPU, inside its `sendmmsg`: the sender's CPU per frame with a
/// receiver minus without one is that receiver's kernel share.
mod ns {
    use std::collections::HashMap;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::process::{Child, ChildStdout, Command, Stdio};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc};
    use std::time::{Duration, Instant};

    use rlbd::capture::{parse, CaptureSocket, ClientTable, Frame, Mac, RingConfig, PACKET_HOST};
    use rlbd::config::{DEFAULT_RING_BLOCKS, DEFAULT_RING_BLOCK_KIB};
    use rlbd::lab::flood::{pin_to_cpu, thread_cpu_ns, FloodReport};
    use rlbd::lab::netns::{is_root, run_cmd, stop_flag};

    pub const ROLE_ARG: &str = "--rlbd-ns-role";
    const TX_MAC: &str = "02:52:4c:42:be:01";
    const RX_MAC: Mac = Mac(0x02, 0x52, 0x4c, 0x42, 0xbe, 0x02);
    const FRAMES: u64 = 2_000_000;
    const SOURCES: u32 = 10_000;
    const SIZES: &str = "64,1500";
    const RX_CPU: usize = 0;
    const TX_CPU: usize = 1;
    /// The daemon's batch per capture wakeup (src/daemon/mod.rs CAPTURE_BATCH).
    const CAPTURE_BATCH: usize = 4096;

    type Res<T> = Result<T, String>;

    fn mac_str(m: &Mac) -> String {
        m.to_string()
    }

    /// `key=value` arguments and result lines.
    fn kv<'a>(words: impl IntoIterator<Item = &'a str>, key: &str) -> Option<&'a str> {
        words
            .into_iter()
            .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
    }

    fn status_kb(key: &str) -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }

    // ---- receivers (run inside the receiver namespace) ----

    pub fn role_main(args: &[String]) -> i32 {
        let words: Vec<&str> = args.iter().map(String::as_str).collect();
        let role = words.first().copied().unwrap_or("");
        let iface = kv(words.iter().copied(), "iface")
            .unwrap_or("rx0")
            .to_string();
        let cpu: usize = kv(words.iter().copied(), "cpu")
            .and_then(|v| v.parse().ok())
            .unwrap_or(RX_CPU);
        let capacity: usize = kv(words.iter().copied(), "capacity")
            .and_then(|v| v.parse().ok())
            .unwrap_or(ClientTable::DEFAULT_CAPACITY);
        let result = pin_to_cpu(cpu)
            .map_err(|e| e.to_string())
            .and_then(|()| match role {
                "recv-rlbd" => recv_rlbd(&iface, capacity),
                "recv-pnet" => recv_pnet(&iface),
                other => Err(format!("unknown role {other:?}")),
            });
        match result {
            Ok(line) => {
                println!("result {line}");
                0
            }
            Err(e) => {
                eprintln!("bench receiver: {e}");
                1
            }
        }
    }

    fn ready() {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "ready");
        let _ = out.flush();
    }

    /// The daemon's per-frame path (src/daemon/mod.rs `run` + `read_capture` + `on_tick`), with
    /// a frame counter added; stops when stdin closes.
    fn recv_rlbd(iface: &str, capacity: usize) -> Res<String> {
        use mio::unix::SourceFd;
        use mio::{Events, Interest, Poll, Token};
        const STDIN: Token = Token(0);
        const CAPTURE: Token = Token(16);
        let ring = RingConfig {
            block_size: DEFAULT_RING_BLOCK_KIB * 1024,
            block_count: DEFAULT_RING_BLOCKS,
            ..RingConfig::default()
        };
        let mut cap =
            CaptureSocket::open_by_name(iface, &[RX_MAC], &ring).map_err(|e| e.to_string())?;
        let mut table = ClientTable::new(capacity, ClientTable::DEFAULT_IDLE_TICKS);
        let mut poll = Poll::new().map_err(|e| e.to_string())?;
        poll.registry()
            .register(&mut cap, CAPTURE, Interest::READABLE)
            .map_err(|e| e.to_string())?;
        poll.registry()
            .register(&mut SourceFd(&0), STDIN, Interest::READABLE)
            .map_err(|e| e.to_string())?;
        let mut events = Events::with_capacity(64);
        let mut arps: Vec<(Frame, bool)> = Vec::with_capacity(64);
        let (mut tick, mut counted, mut stop) = (0u64, 0u64, false);
        let mut next_tick = Instant::now() + Duration::from_secs(1);
        let mut ready_now = true;
        ready();
        let cpu0 = thread_cpu_ns();
        loop {
            let timeout = if ready_now {
                Duration::ZERO
            } else {
                next_tick.saturating_duration_since(Instant::now())
            };
            match poll.poll(&mut events, Some(timeout)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("poll: {e}")),
            }
            for ev in events.iter() {
                match ev.token() {
                    STDIN => stop = true,
                    CAPTURE => ready_now = true,
                    _ => {}
                }
            }
            if ready_now || stop {
                let n = cap.drain(CAPTURE_BATCH, |meta, bytes| match parse(bytes) {
                    Some(Frame::Ipv4 {
                        src_mac,
                        src_ip,
                        dst_ip,
                        ..
                    }) if meta.pkt_type == PACKET_HOST => {
                        table.account(src_mac, src_ip, dst_ip, 0, meta.orig_len, tick);
                        counted += 1;
                    }
                    Some(f @ Frame::Arp { .. }) => arps.push((f, meta.is_outgoing())),
                    _ => {}
                });
                ready_now = n >= CAPTURE_BATCH || cap.pending();
                arps.clear();
            }
            if stop && !ready_now {
                break;
            }
            let now = Instant::now();
            if now >= next_tick {
                tick += 1;
                table.roll_over(tick);
                let _ = cap.stats();
                next_tick += Duration::from_secs(1);
                if next_tick <= now {
                    next_tick = now + Duration::from_secs(1);
                }
            }
        }
        let cpu_ns = thread_cpu_ns() - cpu0;
        let st = cap.stats().map_err(|e| e.to_string())?;
        Ok(format!(
            "counted={counted} packets={} drops={} cpu_ns={cpu_ns} hwm_kb={} rss_kb={} clients={} \
             evictions={}",
            st.packets,
            st.drops,
            status_kb("VmHWM"),
            status_kb("VmRSS"),
            table.len(),
            table.evictions()
        ))
    }

    /// The naive receiver: pnet_datalink's channel, one `recv` per frame, a full copy, a map of
    /// frames per sender. The socket is made the way pnet makes it, but here, so that its kernel
    /// drop counter can be read (pnet does not hand its descriptor out).
    fn recv_pnet(iface: &str) -> Res<String> {
        use pnet_datalink::{Channel, Config};
        let nic = pnet_datalink::interfaces()
            .into_iter()
            .find(|i| i.name == iface)
            .ok_or_else(|| format!("no interface {iface}"))?;
        // SAFETY: plain socket(2) call with constant arguments.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW,
                (libc::ETH_P_ALL as u16).to_be() as i32,
            )
        };
        if fd < 0 {
            return Err(format!("socket: {}", std::io::Error::last_os_error()));
        }
        let config = Config {
            read_timeout: Some(Duration::from_millis(20)),
            socket_fd: Some(fd),
            ..Config::default()
        };
        // pnet owns (and closes) `fd` from here.
        let mut rx = match pnet_datalink::channel(&nic, config) {
            Ok(Channel::Ethernet(_tx, rx)) => rx,
            Ok(_) => return Err("unexpected channel type".into()),
            Err(e) => return Err(format!("pnet channel on {iface}: {e}")),
        };
        let stop = Arc::new(AtomicBool::new(false));
        {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut buf = [0u8; 64];
                while matches!(std::io::stdin().read(&mut buf), Ok(n) if n > 0) {}
                stop.store(true, Ordering::Relaxed);
            });
        }
        let mut per_sender: HashMap<Mac, u64> = HashMap::new();
        let mut counted = 0u64;
        ready();
        let cpu0 = thread_cpu_ns();
        loop {
            match rx.next() {
                Ok(bytes) => {
                    let frame = bytes.to_vec();
                    if frame.len() >= 14
                        && frame[0..6] == RX_MAC.octets()
                        && frame[12..14] == [8, 0]
                    {
                        let mut src = [0u8; 6];
                        src.copy_from_slice(&frame[6..12]);
                        *per_sender.entry(Mac::from(src)).or_insert(0) += 1;
                        counted += 1;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
                Err(e) => return Err(format!("recv: {e}")),
            }
        }
        let cpu_ns = thread_cpu_ns() - cpu0;
        let mut st = libc::tpacket_stats {
            tp_packets: 0,
            tp_drops: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `st` is writable and `len` its size; `fd` is still open (owned by `rx`, alive).
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(format!(
                "PACKET_STATISTICS: {}",
                std::io::Error::last_os_error()
            ));
        }
        drop(rx);
        Ok(format!(
            "counted={counted} packets={} drops={} cpu_ns={cpu_ns} hwm_kb={} rss_kb={} clients={} \
             evictions=0",
            st.tp_packets,
            st.tp_drops,
            status_kb("VmHWM"),
            status_kb("VmRSS"),
            per_sender.len()
        ))
    }

    // ---- the driver (root namespace) ----

    /// The two namespaces; deleted (after killing what runs in them) on drop, so also on
    /// errors, panics and Ctrl-C (which the driver turns into an error).
    struct Pair {
        tx: String,
        rx: String,
        made: Vec<String>,
    }

    impl Pair {
        fn create() -> Res<Pair> {
            let base = format!("rlbd-bench-{}", std::process::id());
            let mut pair = Pair {
                tx: format!("{base}-tx"),
                rx: format!("{base}-rx"),
                made: Vec::new(),
            };
            for ns in [pair.tx.clone(), pair.rx.clone()] {
                run_cmd(&["ip", "netns", "add", &ns])?;
                pair.made.push(ns.clone());
                run_cmd(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
                for key in ["all", "default"] {
                    let script = format!("echo 1 > /proc/sys/net/ipv6/conf/{key}/disable_ipv6");
                    run_cmd(&["ip", "netns", "exec", &ns, "sh", "-c", &script])?;
                }
            }
            let rx_mac = mac_str(&RX_MAC);
            run_cmd(&[
                "ip", "-n", &pair.tx, "link", "add", "tx0", "address", TX_MAC, "type", "veth",
                "peer", "name", "rx0", "address", &rx_mac, "netns", &pair.rx,
            ])?;
            run_cmd(&["ip", "-n", &pair.tx, "link", "set", "tx0", "up"])?;
            run_cmd(&["ip", "-n", &pair.rx, "link", "set", "rx0", "up"])?;
            Ok(pair)
        }

        fn rx_packets(&self) -> u64 {
            run_cmd(&[
                "ip",
                "netns",
                "exec",
                &self.rx,
                "cat",
                "/sys/class/net/rx0/statistics/rx_packets",
            ])
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
        }
    }

    impl Drop for Pair {
        fn drop(&mut self) {
            for ns in &self.made {
                if let Ok(out) = run_cmd(&["ip", "netns", "pids", ns]) {
                    for pid in out.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
                        // SAFETY: kill has no memory-safety preconditions; pid > 0 is one
                        // process, found inside our own namespace.
                        unsafe {
                            libc::kill(pid, libc::SIGKILL);
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(100));
            for ns in self.made.drain(..).rev() {
                if let Err(e) = run_cmd(&["ip", "netns", "del", &ns]) {
                    eprintln!("namespace benchmark teardown: {e}");
                }
            }
        }
    }

    /// Busy and softirq jiffies of one CPU, from /proc/stat.
    fn cpu_jiffies(cpu: usize) -> (u64, u64) {
        let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let tag = format!("cpu{cpu} ");
        let Some(line) = text.lines().find(|l| l.starts_with(&tag)) else {
            return (0, 0);
        };
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal
        let busy = v.iter().take(8).sum::<u64>() - v.get(3).unwrap_or(&0) - v.get(4).unwrap_or(&0);
        (busy, *v.get(6).unwrap_or(&0))
    }

    /// Frames the kernel dropped from its per-CPU input backlogs (all CPUs), from
    /// /proc/net/softnet_stat.
    fn backlog_drops() -> u64 {
        std::fs::read_to_string("/proc/net/softnet_stat")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok())
            .sum()
    }

    #[derive(Clone, Copy, PartialEq)]
    enum Receiver {
        None,
        Rlbd { capacity: usize },
        Pnet,
    }

    #[derive(Default, Clone)]
    struct Run {
        label: String,
        sources: u32,
        table: Option<usize>,
        flood: FloodReport,
        at_rx0: u64,
        backlog_drops: u64,
        core_busy_ns: u64,
        recv: Option<String>,
        /// Over the rounds, for the summary.
        spread: String,
        /// Over the rounds: the most frames a run's receiver socket dropped, and the most a
        /// run's sender sent that its receiver did not count.
        worst_drops: u64,
        worst_lost: u64,
    }

    impl Run {
        fn recv_u64(&self, key: &str) -> Option<u64> {
            kv(self.recv.as_deref()?.split_whitespace(), key)?
                .parse()
                .ok()
        }
        fn sender_ns(&self) -> f64 {
            self.flood.cpu_ns as f64 / self.flood.sent.max(1) as f64
        }
        fn recv_ns(&self) -> Option<f64> {
            Some(self.recv_u64("cpu_ns")? as f64 / self.recv_u64("counted")?.max(1) as f64)
        }
    }

    fn check_stop() -> Res<()> {
        if stop_flag().load(Ordering::Relaxed) {
            Err("interrupted".into())
        } else {
            Ok(())
        }
    }

    /// Reads lines from a receiver's stdout on a thread of its own, so waits can time out.
    fn lines_of(out: ChildStdout) -> mpsc::Receiver<String> {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        rx
    }

    fn expect_line(lines: &mpsc::Receiver<String>, prefix: &str, wait: Duration) -> Res<String> {
        let end = Instant::now() + wait;
        loop {
            check_stop()?;
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("no {prefix:?} line from the receiver in {wait:?}"));
            }
            match lines.recv_timeout(left.min(Duration::from_millis(100))) {
                Ok(l) if l.starts_with(prefix) => return Ok(l),
                Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(format!("the receiver exited without a {prefix:?} line"))
                }
            }
        }
    }

    fn one_run(pair: &Pair, label: &str, receiver: Receiver, sources: u32) -> Res<Run> {
        check_stop()?;
        let me = std::env::current_exe().map_err(|e| e.to_string())?;
        let me = me.to_string_lossy();
        let mut child: Option<(Child, mpsc::Receiver<String>)> = None;
        let role_args: Option<Vec<String>> = match receiver {
            Receiver::None => None,
            Receiver::Rlbd { capacity } => {
                Some(vec!["recv-rlbd".into(), format!("capacity={capacity}")])
            }
            Receiver::Pnet => Some(vec!["recv-pnet".into()]),
        };
        if let Some(role) = role_args {
            let mut c = Command::new("ip")
                .args(["netns", "exec", &pair.rx, &me, ROLE_ARG])
                .args(&role)
                .args(["iface=rx0".to_string(), format!("cpu={RX_CPU}")])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| format!("cannot start the receiver: {e}"))?;
            let lines = lines_of(c.stdout.take().expect("piped stdout"));
            if let Err(e) = expect_line(&lines, "ready", Duration::from_secs(10)) {
                let _ = c.kill();
                let _ = c.wait();
                return Err(e);
            }
            child = Some((c, lines));
        }
        let rx0 = pair.rx_packets();
        let drops0 = backlog_drops();
        let (busy0, _) = cpu_jiffies(TX_CPU);
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &pair.tx,
                env!("CARGO_BIN_EXE_rlbd-lab"),
                "flood",
            ])
            .args(["--iface", "tx0", "--dst-mac", &mac_str(&RX_MAC)])
            .args(["--count", &FRAMES.to_string()])
            .args(["--sources", &sources.to_string(), "--sizes", SIZES])
            .args(["--cpu", &TX_CPU.to_string()])
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run the sender: {e}"))?;
        let (busy1, _) = cpu_jiffies(TX_CPU);
        let text = String::from_utf8_lossy(&out.stdout);
        let flood = FloodReport::from_output(&text)
            .ok_or_else(|| format!("the sender printed {:?} ({})", text.trim(), out.status))?;
        // Longer than the ring's block retire timeout (20 ms): everything is handed over.
        std::thread::sleep(Duration::from_millis(300));
        let mut run = Run {
            label: label.into(),
            sources,
            table: match receiver {
                Receiver::Rlbd { capacity } => Some(capacity),
                _ => None,
            },
            flood,
            at_rx0: pair.rx_packets().saturating_sub(rx0),
            backlog_drops: backlog_drops().saturating_sub(drops0),
            // USER_HZ is 100 on Linux.
            core_busy_ns: busy1.saturating_sub(busy0) * 10_000_000,
            recv: None,
            spread: String::new(),
            worst_drops: 0,
            worst_lost: 0,
        };
        if let Some((mut c, lines)) = child {
            drop(c.stdin.take());
            let line = expect_line(&lines, "result ", Duration::from_secs(20));
            let _ = c.kill();
            let _ = c.wait();
            run.recv = Some(line?.trim_start_matches("result ").to_string());
        }
        Ok(run)
    }

    fn other_labs(mine: &str) -> Vec<String> {
        run_cmd(&["ip", "netns", "list"])
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| n.starts_with("rlbd-") && !n.starts_with(mine))
            .map(str::to_string)
            .collect()
    }

    fn wait_for_other_labs() -> Res<()> {
        let mine = format!("rlbd-bench-{}", std::process::id());
        let start = Instant::now();
        let mut said = false;
        loop {
            let others = other_labs(&mine);
            if others.is_empty() {
                return Ok(());
            }
            if !said {
                println!(
                    "waiting for other rlbd namespace labs to finish (they would share the CPUs): {}",
                    others.join(" ")
                );
                said = true;
            }
            if start.elapsed() > Duration::from_secs(900) {
                return Err(format!("other labs still running after 15 min: {others:?}"));
            }
            check_stop()?;
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Share of all CPUs busy over `d`, from /proc/stat.
    fn busy_share(d: Duration) -> f64 {
        let total = || {
            let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
            let v: Vec<u64> = text
                .lines()
                .next()
                .unwrap_or_default()
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            let all: u64 = v.iter().take(8).sum();
            (all, v.get(3).unwrap_or(&0) + v.get(4).unwrap_or(&0))
        };
        let (a0, i0) = total();
        std::thread::sleep(d);
        let (a1, i1) = total();
        let all = a1.saturating_sub(a0).max(1);
        1.0 - i1.saturating_sub(i0) as f64 / all as f64
    }

    /// Waits (at most 2 minutes) until other processes leave the CPUs mostly idle: the figures
    /// are CPU times, and a busy neighbour on the same core inflates them.
    fn wait_for_quiet() -> Res<()> {
        let start = Instant::now();
        let mut said = false;
        loop {
            let busy = busy_share(Duration::from_secs(1));
            if busy < 0.15 {
                return Ok(());
            }
            if start.elapsed() > Duration::from_secs(120) {
                println!(
                    "  the CPUs are still {:.0}% busy with other work after 2 min: going on; \
                     the figures below are noisier than they should be",
                    busy * 100.0
                );
                return Ok(());
            }
            if !said {
                println!(
                    "  waiting for other work to leave the CPUs ({:.0}% busy)",
                    busy * 100.0
                );
                said = true;
            }
            check_stop()?;
        }
    }

    fn fmt_kb(kb: Option<u64>) -> String {
        kb.map_or("-".into(), |k| format!("{:.1} MB", k as f64 / 1024.0))
    }

    fn print_table(runs: &[Run], base: &Run) {
        println!(
            "\n{:<34} {:>7} {:>6} {:>9} {:>6} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>9}",
            "run",
            "sources",
            "table",
            "sent",
            "Mfps",
            "at rx0",
            "counted",
            "dropped",
            "recv ns/f",
            "send ns/f",
            "kern ns/f",
            "core ns/f",
            "peak RSS"
        );
        for r in runs {
            let counted = r.recv_u64("counted");
            let drops = r.recv_u64("drops");
            let kern = if r.recv.is_some() {
                format!("{:.0}", r.sender_ns() - base.sender_ns())
            } else {
                "-".into()
            };
            println!(
                "{:<34} {:>7} {:>6} {:>9} {:>6.2} {:>9} {:>9} {:>9} {:>9} {:>8.0} {:>8} {:>8.0} {:>9}",
                r.label,
                r.sources,
                r.table.map_or("-".into(), |t| t.to_string()),
                r.flood.sent,
                r.flood.sent as f64 / r.flood.secs.max(1e-9) / 1e6,
                r.at_rx0,
                counted.map_or("-".into(), |c| c.to_string()),
                drops.map_or("-".into(), |d| d.to_string()),
                r.recv_ns().map_or("-".into(), |n| format!("{n:.1}")),
                r.sender_ns(),
                kern,
                r.core_busy_ns as f64 / r.flood.sent.max(1) as f64,
                fmt_kb(r.recv_u64("hwm_kb")),
            );
        }
        println!(
            "  sent: frames the sender's kernel accepted (failed: {}); at rx0: the receiving \
             veth's rx_packets; dropped: the receiver socket's PACKET_STATISTICS drops; kernel \
             input-backlog drops: {}",
            runs.iter()
                .map(|r| r.flood.failed.to_string())
                .collect::<Vec<_>>()
                .join("/"),
            runs.iter()
                .map(|r| r.backlog_drops.to_string())
                .collect::<Vec<_>>()
                .join("/")
        );
        println!(
            "  recv ns/f: receiver thread CPU (getrusage RUSAGE_THREAD) per counted frame; send \
             ns/f: sender thread CPU per sent frame; kern ns/f: send ns/f minus the run without \
             a receiver (the receiver's kernel share, spent on the sender's CPU on a veth); core \
             ns/f: the sender CPU's busy time from /proc/stat (10 ms resolution, any process); \
             peak RSS: the receiver process's VmHWM"
        );
        for r in runs {
            println!(
                "  {}: {}{}",
                r.label,
                r.recv.as_deref().unwrap_or("no receiver"),
                if r.spread.is_empty() {
                    String::new()
                } else {
                    format!("; over the rounds: {}", r.spread)
                }
            );
        }
    }

    fn verdict(ok: bool) -> &'static str {
        if ok {
            "met"
        } else {
            "NOT met"
        }
    }

    fn print_targets(base: &Run, a: &Run, b: &Run, big: &Run) {
        let (drops, lost) = (a.worst_drops, a.worst_lost);
        let a_ns = a.recv_ns().unwrap_or(f64::MAX);
        let b_ns = b.recv_ns().unwrap_or(f64::MAX);
        let ratio = a_ns / b_ns;
        let rss = big.recv_u64("hwm_kb").unwrap_or(u64::MAX);
        println!("\ntargets:");
        println!(
            "  rlbd drops nothing at the sender's full rate ({:.2} Mfps), in any round: at most {} \
             dropped, at most {} sent but not counted -> {}",
            a.flood.sent as f64 / a.flood.secs.max(1e-9) / 1e6,
            drops,
            lost,
            verdict(drops == 0 && lost == 0)
        );
        println!(
            "  rlbd receiver CPU <= 100 ns/frame with its real accounting: {a_ns:.1} ns -> {}",
            verdict(a_ns <= 100.0)
        );
        println!(
            "  rlbd <= 1/10 of the naive receiver: {a_ns:.1} / {b_ns:.1} ns = {ratio:.3} (1/{:.0}) \
             -> {}",
            1.0 / ratio,
            verdict(ratio <= 0.1)
        );
        println!(
            "  kernel share on the sender's CPU: rlbd {:.0} ns/frame, naive {:.0} ns/frame",
            a.sender_ns() - base.sender_ns(),
            b.sender_ns() - base.sender_ns()
        );
        println!(
            "  RSS < 20 MB with 65,536 clients tracked: peak {} with {} clients in a {}-entry \
             table -> {}",
            fmt_kb(Some(rss)),
            big.recv_u64("clients").unwrap_or(0),
            big.table.unwrap_or(0),
            verdict(rss < 20 * 1024)
        );
        println!(
            "  (that run: at most {} dropped, at most {} not counted, in any round)",
            big.worst_drops, big.worst_lost
        );
        println!(
            "  for scale (measured earlier on this machine): a bare TPACKET_V3 ring + BPF filter + \
             a counter, 35-40 ns/frame; a pnet_datalink receiver, 1,500-1,700 ns/frame with 1-11% \
             dropped"
        );
    }

    fn bench() -> Res<()> {
        wait_for_other_labs()?;
        let pair = Pair::create()?;
        let started = Instant::now();
        println!(
            "\nnamespace benchmark: {FRAMES} frames per run (64 and 1500 bytes in turn) over a veth \
             between {} and {}; receiver pinned to CPU {RX_CPU}, sender to CPU {TX_CPU}; load \
             average {}",
            pair.tx,
            pair.rx,
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        );
        let plan: [(&str, Receiver, u32); 5] = [
            ("baseline: no receiver", Receiver::None, SOURCES),
            (
                "(a) rlbd, table 16384",
                Receiver::Rlbd { capacity: 16_384 },
                SOURCES,
            ),
            (
                "(a') rlbd, default table 4096",
                Receiver::Rlbd {
                    capacity: ClientTable::DEFAULT_CAPACITY,
                },
                SOURCES,
            ),
            ("(b) naive pnet_datalink", Receiver::Pnet, SOURCES),
            (
                "(a) rlbd, 65,536 clients",
                Receiver::Rlbd { capacity: 65_536 },
                65_536,
            ),
        ];
        let rounds: usize = std::env::var("RLBD_BENCH_NS_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|n| *n >= 1)
            .unwrap_or(3);
        // Rounds of the whole plan, so that a noisy moment spreads over every configuration.
        let mut all: Vec<Vec<Run>> = vec![Vec::new(); plan.len()];
        for round in 1..=rounds {
            println!("round {round} of {rounds}:");
            wait_for_quiet()?;
            for (i, (label, receiver, sources)) in plan.iter().enumerate() {
                let run = one_run(&pair, label, *receiver, *sources)?;
                println!(
                    "  {label}: sent {} in {:.2} s, sender {:.0} ns/frame{}",
                    run.flood.sent,
                    run.flood.secs,
                    run.sender_ns(),
                    run.recv
                        .as_ref()
                        .map_or(String::new(), |r| format!("; receiver: {r}"))
                );
                all[i].push(run);
            }
        }
        // Per configuration the median run (by receiver CPU per frame; the baseline by sender
        // CPU per frame), with the spread over the rounds.
        let mut runs = Vec::new();
        for (i, set) in all.iter().enumerate() {
            let key = |r: &Run| {
                if i == 0 {
                    r.sender_ns()
                } else {
                    r.recv_ns().unwrap_or(f64::MAX)
                }
            };
            let mut sorted: Vec<&Run> = set.iter().collect();
            sorted.sort_by(|a, b| key(a).total_cmp(&key(b)));
            let mut median = sorted[sorted.len() / 2].clone();
            let send: Vec<f64> = set.iter().map(Run::sender_ns).collect();
            let recv: Vec<f64> = set.iter().filter_map(Run::recv_ns).collect();
            let range = |v: &[f64]| {
                let lo = v.iter().copied().fold(f64::MAX, f64::min);
                let hi = v.iter().copied().fold(0.0, f64::max);
                format!("{lo:.0}-{hi:.0}")
            };
            median.spread = format!(
                "send ns/f {}{}",
                range(&send),
                if recv.is_empty() {
                    String::new()
                } else {
                    format!(", recv ns/f {}", range(&recv))
                }
            );
            median.worst_drops = set
                .iter()
                .filter_map(|r| r.recv_u64("drops"))
                .max()
                .unwrap_or(0);
            median.worst_lost = set
                .iter()
                .filter_map(|r| Some(r.flood.sent.saturating_sub(r.recv_u64("counted")?)))
                .max()
                .unwrap_or(0);
            if median.recv.is_some() {
                median.spread += &format!(
                    ", dropped at most {}, not counted at most {}",
                    median.worst_drops, median.worst_lost
                );
            }
            runs.push(median);
        }
        println!("\nmedian of {rounds} round(s) per configuration:");
        print_table(&runs, &runs[0]);
        print_targets(&runs[0], &runs[1], &runs[3], &runs[4]);
        println!(
            "\nnamespace benchmark took {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    pub fn main() {
        if !is_root() {
            println!("namespace benchmark: skipped, needs root (network namespaces, AF_PACKET)");
            return;
        }
        // SIGINT/SIGTERM set the flag; the waits turn it into an error, and dropping the
        // namespace pair cleans up.
        let _ = stop_flag();
        if let Err(e) = bench() {
            eprintln!("namespace benchmark failed: {e}");
            std::process::exit(1);
        }
    }
}
