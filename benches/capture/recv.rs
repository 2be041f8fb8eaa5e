//! The receivers of the namespace benchmark, run inside the receiver namespace as this binary
//! again (`--rlbd-ns-role ROLE key=value...`): rlbd's capture path as the daemon runs it (and,
//! in `baselines.rs`, what it is measured against: the bare tc hook, a naive pnet_datalink
//! receiver). Each prints `ready`, then one `result key=value...` line when
//! its stdin closes. A `mark` line on stdin restarts its counts (after a warm-up).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use rlbd::capture::ebpf::{map_entries, Delta, Hook, KernelCounter};
use rlbd::capture::sampling::Sampler;
use rlbd::capture::{parse, CaptureSocket, ClientTable, Frame, Mac, RingConfig, PACKET_HOST};
use rlbd::config::{DEFAULT_RING_BLOCKS, DEFAULT_RING_BLOCK_KIB};
use rlbd::netlink::{NlEvent, RouteSocket};
use rlbd_lab::flood::{pin_to_cpu, thread_cpu_ns};

use super::baselines;
use super::{kv, Res, RX_CPU, RX_MAC};

/// The daemon's batch per capture wakeup (src/daemon/mod.rs CAPTURE_BATCH).
const CAPTURE_BATCH: usize = 4096;

pub(super) fn status_kb(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

pub(super) fn ready() {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ready");
    let _ = out.flush();
}

/// How the rlbd receiver counts: like the daemon (`auto`, with `limit`), every frame (`off`),
/// or one in a fixed N.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    Auto(u32),
    Off,
    Fixed(u32),
    /// Counting in the kernel (eBPF map), read once a second, the program a socket filter.
    Ebpf,
    /// The same with the program at the tc ingress hook (the daemon's first choice): a tcx link
    /// where the kernel has them.
    EbpfTc,
    /// The same through a `cls_bpf` filter (what kernels before 6.6 have).
    EbpfTcFilter,
    /// The same in the per-CPU LRU hash (the fallback where the kernel cannot map a map).
    EbpfHash,
    /// At the tc ingress hook, sampled as the daemon does it: one data frame in N, N from the
    /// port's packet rate and `limit` (the daemon's `max_frames_per_sec`).
    EbpfTcAuto(u32),
    /// At the tc ingress hook, one data frame in a fixed N.
    EbpfTcFixed(u32),
}

impl Sampling {
    pub fn arg(&self) -> String {
        match self {
            Sampling::Auto(limit) => format!("sampling=auto:{limit}"),
            Sampling::Off => "sampling=off".into(),
            Sampling::Fixed(n) => format!("sampling=fixed:{n}"),
            Sampling::Ebpf => "sampling=ebpf".into(),
            Sampling::EbpfTc => "sampling=ebpf-tc".into(),
            Sampling::EbpfTcFilter => "sampling=ebpf-tc-filter".into(),
            Sampling::EbpfHash => "sampling=ebpf-hash".into(),
            Sampling::EbpfTcAuto(limit) => format!("sampling=ebpf-tc-auto:{limit}"),
            Sampling::EbpfTcFixed(n) => format!("sampling=ebpf-tc-fixed:{n}"),
        }
    }

    fn parse(s: &str) -> Option<Sampling> {
        match s.split_once(':') {
            Some(("auto", l)) => l.parse().ok().map(Sampling::Auto),
            Some(("fixed", n)) => n.parse().ok().map(Sampling::Fixed),
            Some(("ebpf-tc-auto", l)) => l.parse().ok().map(Sampling::EbpfTcAuto),
            Some(("ebpf-tc-fixed", n)) => n.parse().ok().map(Sampling::EbpfTcFixed),
            None if s == "off" => Some(Sampling::Off),
            None if s == "ebpf" => Some(Sampling::Ebpf),
            None if s == "ebpf-tc" => Some(Sampling::EbpfTc),
            None if s == "ebpf-tc-filter" => Some(Sampling::EbpfTcFilter),
            None if s == "ebpf-hash" => Some(Sampling::EbpfHash),
            _ => None,
        }
    }
}

pub fn role_main(args: &[String]) -> i32 {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let role = words.first().copied().unwrap_or("");
    let get = |k: &str| kv(words.iter().copied(), k);
    let iface = get("iface").unwrap_or("rx0").to_string();
    let cpu: usize = get("cpu").and_then(|v| v.parse().ok()).unwrap_or(RX_CPU);
    let capacity: usize = get("capacity")
        .and_then(|v| v.parse().ok())
        .unwrap_or(ClientTable::DEFAULT_CAPACITY);
    let sampling = get("sampling")
        .and_then(Sampling::parse)
        .unwrap_or(Sampling::Off);
    let per_client = get("per-client") == Some("1");
    let result = if role == "churn" {
        Ok(())
    } else {
        pin_to_cpu(cpu).map_err(|e| e.to_string())
    };
    let result = result.and_then(|()| match role {
        "recv-rlbd" => {
            RlbdReceiver::open(&iface, capacity, sampling, per_client).and_then(RlbdReceiver::run)
        }
        "recv-pnet" => baselines::recv_pnet(&iface),
        "recv-floor" => baselines::recv_floor(&iface),
        "churn" => churn(capacity, &words),
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

/// `churn capacity=C clients=K frames=F`: the daemon's per-frame work without the ring (`parse`
/// and `ClientTable::account`) for F frames from K sources in turn, for counting instructions,
/// cache misses and branch mispredictions per frame under valgrind (run it with two values of F:
/// the difference is the per-frame cost without the set-up).
fn churn(capacity: usize, words: &[&str]) -> Res<String> {
    let get = |k: &str| -> Res<u64> {
        kv(words.iter().copied(), k)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("churn needs {k}=N"))
    };
    let (clients, frames) = (get("clients")?, get("frames")?);
    let captures: Vec<Vec<u8>> = (0..clients as u32)
        .map(|i| super::frame96(rlbd_lab::flood::source(i, None).0))
        .collect();
    let mut table = ClientTable::new(capacity, ClientTable::DEFAULT_IDLE_TICKS);
    for i in 0..frames as usize {
        if let Some(Frame::Ipv4 {
            src_mac,
            src_ip,
            dst_ip,
            ..
        }) = parse(&captures[i % captures.len()])
        {
            table.account(
                src_mac.into(),
                src_ip.into(),
                dst_ip.into(),
                0,
                1514,
                (i / 1_000_000) as u64,
                |_| true,
            );
        }
    }
    Ok(format!(
        "clients={} evictions={}",
        table.len(),
        table.evictions()
    ))
}

/// What the receiver counted since the last `mark`.
#[derive(Default)]
struct Since {
    cpu_ns: u64,
    /// The counting program's run time and runs (kernel.bpf_stats_enabled).
    prog: (u64, u64),
    counted: u64,
    packets: u64,
    drops: u64,
    at: Option<Instant>,
}

/// The daemon's per-frame path (src/daemon/mod.rs `run`, `read_capture`, `on_tick`,
/// `read_netlink`): the capture socket drained in batches, `parse`, `ClientTable::account` with
/// the frame's weight, a roll-over and the port's counter request every second, the port's
/// Sampler fed from the counter and from the frames drained.
struct RlbdReceiver {
    cap: CaptureSocket,
    nl: RouteSocket,
    table: ClientTable,
    sampler: Option<Sampler>,
    counter: Option<KernelCounter>,
    deltas: Vec<Delta>,
    counts: Vec<(usize, Delta)>,
    /// Estimated bytes per client since `mark` (only when asked: it costs per frame).
    per_client: Option<HashMap<Mac, u64>>,
    start: Instant,
    tick: u64,
    counted: u64,
    changes: Vec<u32>,
    mark: Since,
}

impl RlbdReceiver {
    fn open(iface: &str, capacity: usize, sampling: Sampling, per_client: bool) -> Res<Self> {
        let ring = RingConfig {
            block_size: DEFAULT_RING_BLOCK_KIB * 1024,
            block_count: DEFAULT_RING_BLOCKS,
            ..RingConfig::default()
        };
        let mut cap =
            CaptureSocket::open_by_name(iface, &[RX_MAC], &ring).map_err(|e| e.to_string())?;
        let mut counter = None;
        let sampler = match sampling {
            Sampling::Auto(limit) => Some(Sampler::new(Some(limit))),
            Sampling::Off => None,
            Sampling::Fixed(n) => {
                cap.set_sampling(n).map_err(|e| e.to_string())?;
                None
            }
            Sampling::Ebpf | Sampling::EbpfHash => {
                let make = if sampling == Sampling::Ebpf {
                    KernelCounter::new
                } else {
                    KernelCounter::with_hash
                };
                let hook = Hook::socket(ring.snap_len);
                let c = make(&[], hook, map_entries(capacity), iface).map_err(|e| e.to_string())?;
                c.attach(cap.as_fd()).map_err(|e| e.to_string())?;
                counter = Some(c);
                None
            }
            Sampling::EbpfTc
            | Sampling::EbpfTcFilter
            | Sampling::EbpfTcAuto(_)
            | Sampling::EbpfTcFixed(_) => {
                // Exactly as the daemon does: the programs at the tc hooks, the socket off the
                // tap (the counts are read through it).
                cap.set_tc_links(sampling != Sampling::EbpfTcFilter);
                cap.count_at_tc(&[], map_entries(capacity))
                    .map_err(|e| e.to_string())?;
                match sampling {
                    Sampling::EbpfTcAuto(limit) => Some(Sampler::new(Some(limit))),
                    Sampling::EbpfTcFixed(n) => {
                        cap.set_sampling(n).map_err(|e| e.to_string())?;
                        None
                    }
                    _ => None,
                }
            }
        };
        Ok(RlbdReceiver {
            cap,
            nl: RouteSocket::open().map_err(|e| e.to_string())?,
            table: ClientTable::new(capacity, ClientTable::DEFAULT_IDLE_TICKS),
            sampler,
            counter,
            deltas: Vec::new(),
            counts: Vec::new(),
            per_client: per_client.then(HashMap::new),
            start: Instant::now(),
            tick: 0,
            counted: 0,
            changes: Vec::new(),
            mark: Since::default(),
        })
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn set_sampling(&mut self, n: Option<u32>) {
        if let Some(n) = n {
            if self.cap.set_sampling(n).is_ok() {
                self.changes.push(n);
            }
        }
    }

    fn do_mark(&mut self) {
        self.read_counter();
        let st = self.cap.stats().unwrap_or_default();
        self.mark = Since {
            prog: self.prog_stats(),
            cpu_ns: thread_cpu_ns(),
            counted: self.counted,
            packets: st.packets,
            drops: st.drops,
            at: Some(Instant::now()),
        };
        if let Some(m) = &mut self.per_client {
            m.clear();
        }
    }

    fn drain(&mut self) -> bool {
        let (table, tick, per_client) = (&mut self.table, self.tick, &mut self.per_client);
        let mut counted = 0u64;
        let n = self
            .cap
            .drain(CAPTURE_BATCH, |meta, bytes| match parse(bytes) {
                Some(Frame::Ipv4 {
                    src_mac,
                    src_ip,
                    dst_ip,
                    ..
                }) if meta.pkt_type == PACKET_HOST => {
                    table.account(
                        src_mac.into(),
                        src_ip.into(),
                        dst_ip.into(),
                        0,
                        meta.bytes(),
                        tick,
                        |_| true,
                    );
                    if let Some(m) = per_client {
                        *m.entry(src_mac).or_insert(0) += meta.bytes();
                    }
                    counted += 1;
                }
                Some(f @ (Frame::Arp { .. } | Frame::Nd { .. })) => {
                    std::hint::black_box((f, meta.is_outgoing()));
                }
                _ => {}
            });
        self.counted += counted;
        let now_ms = self.now_ms();
        let change = self.sampler.as_mut().and_then(|s| s.on_drained(now_ms, n));
        self.set_sampling(change);
        n >= CAPTURE_BATCH || self.cap.pending()
    }

    fn read_netlink(&mut self) {
        let mut events = Vec::new();
        while matches!(self.nl.read_batch(256, &mut events), Ok(true)) {}
        let now_ms = self.now_ms();
        for ev in events {
            if let NlEvent::Link(l) = ev {
                if let (true, Some(pk), Some(s)) = (
                    l.index == self.cap.ifindex(),
                    l.rx_packets,
                    self.sampler.as_mut(),
                ) {
                    let change = s.on_counter(now_ms, pk);
                    self.set_sampling(change);
                }
            }
        }
    }

    /// The kernel's counts since the last reading into the table (the daemon's tick).
    fn read_counter(&mut self) {
        let t0 = thread_cpu_ns();
        let read = match self.counter.as_mut() {
            Some(c) => c.read(&mut self.deltas),
            None if self.cap.counts_in_kernel() => self.cap.read_counts(&mut self.deltas),
            None => return,
        };
        if let Err(e) = read {
            eprintln!("bench receiver: reading the counting map: {e}");
        }
        let t1 = thread_cpu_ns();
        // As the daemon feeds them: each count with its port's index, all ports at once.
        for d in &self.deltas {
            if let Some(m) = &mut self.per_client {
                *m.entry(d.key.client.mac).or_insert(0) += d.bytes;
            }
            self.counted += d.frames;
        }
        self.counts.clear();
        self.counts.extend(self.deltas.drain(..).map(|d| (0, d)));
        self.table
            .account_kernel_counts(&self.counts, self.tick, |_| true);
        let t2 = thread_cpu_ns();
        if std::env::var_os("RLBD_BENCH_DEBUG").is_some() {
            eprintln!(
                "map read: {} entries changed, read {} us, fed {} us",
                self.counts.len(),
                (t1 - t0) / 1000,
                (t2 - t1) / 1000
            );
        }
    }

    fn on_tick(&mut self) {
        self.read_counter();
        self.tick += 1;
        self.table.roll_over(self.tick);
        let _ = self.cap.stats();
        let _ = self.nl.request_link(self.cap.ifindex());
    }

    fn run(mut self) -> Res<String> {
        use mio::unix::SourceFd;
        use mio::{Events, Interest, Poll, Token};
        const STDIN: Token = Token(0);
        const NETLINK: Token = Token(1);
        const CAPTURE: Token = Token(16);
        let mut poll = Poll::new().map_err(|e| e.to_string())?;
        let reg = poll.registry();
        reg.register(&mut self.cap, CAPTURE, Interest::READABLE)
            .and_then(|()| reg.register(self.nl.socket_mut(), NETLINK, Interest::READABLE))
            .and_then(|()| reg.register(&mut SourceFd(&0), STDIN, Interest::READABLE))
            .map_err(|e| e.to_string())?;
        set_nonblocking(0);
        let mut events = Events::with_capacity(64);
        let (mut stop, mut ready_now, mut nl_ready) = (false, true, false);
        let mut next_tick = Instant::now() + Duration::from_secs(1);
        ready();
        self.do_mark();
        loop {
            let timeout = if ready_now || nl_ready {
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
                    STDIN => match read_stdin() {
                        Stdin::Mark => self.do_mark(),
                        Stdin::Eof => stop = true,
                        Stdin::Nothing => {}
                    },
                    NETLINK => nl_ready = true,
                    CAPTURE => ready_now = true,
                    _ => {}
                }
            }
            if nl_ready {
                self.read_netlink();
                nl_ready = false;
            }
            if ready_now || stop {
                ready_now = self.drain();
            }
            if stop && !ready_now {
                self.read_counter();
                break;
            }
            let now = Instant::now();
            if now >= next_tick {
                self.on_tick();
                next_tick += Duration::from_secs(1);
                if next_tick <= now {
                    next_tick = now + Duration::from_secs(1);
                }
            }
        }
        self.report()
    }

    fn prog_stats(&self) -> (u64, u64) {
        match &self.counter {
            Some(c) => c.run_stats().ok(),
            None => self.cap.kernel_run_stats(),
        }
        .unwrap_or((0, 0))
    }

    fn report(&self) -> Res<String> {
        let cpu_ns = thread_cpu_ns() - self.mark.cpu_ns;
        let prog = self.prog_stats();
        let prog = if prog.1 > self.mark.prog.1 {
            format!(
                " prog_ns={:.1}",
                (prog.0 - self.mark.prog.0) as f64 / (prog.1 - self.mark.prog.1) as f64
            )
        } else {
            String::new()
        };
        let st = self.cap.stats().map_err(|e| e.to_string())?;
        let changes: Vec<String> = self.changes.iter().map(u32::to_string).collect();
        let per_client = self.per_client.as_ref().map_or(String::new(), |m| {
            let mut v: Vec<String> = m.iter().map(|(k, b)| format!("{k}/{b}")).collect();
            v.sort();
            format!(" est={}", v.join(","))
        });
        Ok(format!(
            "counted={} packets={} drops={} cpu_ns={cpu_ns} hwm_kb={} rss_kb={} clients={} \
             evictions={} ratio={} ratios={} secs={:.3}{prog}{per_client}",
            self.counted - self.mark.counted,
            st.packets - self.mark.packets,
            st.drops - self.mark.drops,
            status_kb("VmHWM"),
            status_kb("VmRSS"),
            self.table.len(),
            self.table.evictions(),
            self.cap.sampling(),
            if changes.is_empty() {
                "-".into()
            } else {
                changes.join("/")
            },
            self.mark.at.map_or(0.0, |t| t.elapsed().as_secs_f64()),
        ))
    }
}

fn set_nonblocking(fd: i32) {
    // SAFETY: fcntl on our own stdin with integer arguments only.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

enum Stdin {
    Mark,
    Eof,
    Nothing,
}

/// Reads what stdin has (nonblocking): a `mark` line, or its end.
fn read_stdin() -> Stdin {
    let mut buf = [0u8; 256];
    let mut got = Stdin::Nothing;
    loop {
        match std::io::stdin().lock().read(&mut buf) {
            Ok(0) => return Stdin::Eof,
            Ok(n) if buf[..n].windows(4).any(|w| w == b"mark") => got = Stdin::Mark,
            Ok(_) => {}
            Err(_) => return got,
        }
    }
}
