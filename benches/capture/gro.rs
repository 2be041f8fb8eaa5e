//! What counting costs a server per byte it receives: bulk TCP into a server namespace over a
//! veth with GRO, at 1500 and 9000 MTU, each run without and then with rlbd's counting at the
//! tc hooks (the order alternates by round), and the receive side's CPU measured around it.
//!
//! The lab: a client and a server namespace on a veth (`gc<pid>` - `gs<pid>`). The client's end
//! has no TSO, so GSO cuts the stream into wire-sized segments as it leaves, one veth packet
//! each, as from a NIC; the server's end merges them with GRO in its NAPI poll, threaded
//! (`/sys/class/net/*/threaded`), the thread pinned to the receive CPU: the whole receive path
//! (GRO, the tc hook and rlbd's programs, IP, TCP, the socket queue) runs in that one kernel
//! thread, as in a NIC's softirq. The client's end has a NAPI thread too, on the sender's CPU,
//! so the ACKs are taken in there. The receiver (`gro-sink`, this binary again) reads and
//! discards on the receive CPU; the sender (`gro-send`) writes 256 KiB at a time from the other.
//! rlbd is `recv.rs`'s receiver in `ebpf-tc` mode: the daemon's own set-up of a port.
//!
//! Receive CPU = the server's NAPI thread + the receiver + rlbd's process, each task's run time
//! from /proc/<tid>/schedstat (on a kernel without IRQ time accounting, a softirq is in the run
//! time of the task it interrupts). What judges is the whole path: receive CPU per GB with rlbd
//! over without, in each round's pair, with kernel.bpf_stats_enabled off (the kernel's timing
//! of each program run is itself a cost on the path); its median and a 90% interval over the
//! rounds. The breakdown comes from a third, timed run per MTU (statistics on): rlbd's share =
//! its programs' run time (ingress and egress, from /proc/<pid>/fdinfo) + its process, over the
//! receive CPU of that run. The egress program's own cost per ACK is measured apart, by the
//! kernel (`gro_cost.rs`).
//!
//! What rlbd counted in each run is checked against the veth's receive counters (frames and
//! bytes, as on the wire before GRO merged them): more than 1% apart fails the bench.
//!
//! `RLBD_BENCH_GRO=0` skips this part, `RLBD_BENCH_GRO=only` runs it without the flood and
//! idle parts; `Plan` sizes it (`RLBD_BENCH_GRO_ROUNDS`, `_MAX_ROUNDS`, `_SETTLE`, `_SECS`;
//! `RLBD_BENCH_GRO_SHORT=1` is CI's short form); `RLBD_BENCH_GRO_PERF=1` profiles every run too
//! (a lower bound of the programs' share; its sampling slows the receive side). `ethtool` is
//! installed when missing (`gro_setup.rs`).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

use rlbd_lab::flood::pin_to_cpu;
use rlbd_lab::netns::is_root;

use super::gro_lab::{
    cpu_busy_ns, dev_rx, process_ns, program_deltas, programs, task_ns, BpfStats, Lab, SRV_IP,
};
use super::gro_perf;
use super::gro_report::{self, GroFigures};
use super::lab::{check_stop, expect_line, lines_of, wait_for_other_labs, wait_for_quiet};
use super::profile::{self, Profile};
use super::{gro_cost, gro_setup};
use super::{kv, Res, ROLE_ARG, RX_CPU, TX_CPU};

pub const MTUS: [u32; 2] = [1500, 9000];
const PORT: u16 = 5201;
const CHUNK: usize = 256 * 1024;
const ETH_HDR: u64 = 14;

static FIGURES: OnceLock<GroFigures> = OnceLock::new();

/// The figures for the summary line, once this part has run: rlbd's share of the receive CPU
/// at 1500 and 9000 MTU, worst over the rounds.
pub fn figures() -> Option<&'static GroFigures> {
    FIGURES.get()
}

/// One run: the bytes received and the CPU times over the transfer, in ns.
#[derive(Clone, Default)]
pub struct Run {
    pub round: usize,
    pub mtu: u32,
    pub rlbd: bool,
    /// Whether the kernel timed each program run (kernel.bpf_stats_enabled): only these runs
    /// have the programs' run time, and their whole path carries the timing's cost.
    pub timed: bool,
    pub bytes: u64,
    pub secs: f64,
    /// Packets and bytes the server's veth received (before GRO: the wire's).
    pub wire: u64,
    pub wire_bytes: u64,
    /// What rlbd counted over its run: frames (GRO packets counted as the frames merged into
    /// them) and bytes (each with the headers it carried on the wire).
    pub counted: Option<(u64, u64)>,
    pub napi_ns: u64,
    pub sink_ns: u64,
    pub daemon_ns: u64,
    /// rlbd's ingress program (the one loaded first) and its other (egress) programs:
    /// run time in ns, runs.
    pub ingress: (u64, u64),
    pub egress: (u64, u64),
    /// The receive CPU's busy time in /proc/stat (whatever ran there), for comparison.
    pub cpu_busy_ns: u64,
    /// From a profile of the receive side's tasks: samples inside rlbd's programs, and all.
    pub perf: Option<(u64, u64)>,
}

impl Run {
    pub fn recv_ns(&self) -> u64 {
        self.napi_ns + self.sink_ns + self.daemon_ns
    }

    pub fn rlbd_ns(&self) -> u64 {
        self.ingress.0 + self.egress.0 + self.daemon_ns
    }

    pub fn share_pct(&self) -> f64 {
        100.0 * self.rlbd_ns() as f64 / self.recv_ns().max(1) as f64
    }

    /// The share without the kernel's timing of each run: the egress program leaves an ACK
    /// in 3 instructions, so its ns per run is the timing's own floor (`hook_ns`), taken off
    /// every run of both programs (at least 0 each).
    pub fn net_share_pct(&self) -> f64 {
        let floor = self.egress.0 as f64 / self.egress.1.max(1) as f64;
        let net = |(ns, runs): (u64, u64)| (ns as f64 - runs as f64 * floor).max(0.0);
        let own = net(self.ingress) + net(self.egress) + self.daemon_ns as f64;
        100.0 * own / self.recv_ns().max(1) as f64
    }

    /// The share with the programs' time from the profile (`gro_perf.rs`): a lower bound.
    pub fn perf_share_pct(&self) -> Option<f64> {
        let (under, all) = self.perf?;
        let daemon = self.daemon_ns as f64 / self.recv_ns().max(1) as f64;
        Some(100.0 * (under as f64 / all.max(1) as f64 + daemon))
    }

    /// How far rlbd's count is from the veth's receive counters, in % of frames and of bytes.
    /// A veth receiving in its NAPI poll counts each frame's bytes without its Ethernet header
    /// (1500 a frame at 1500 MTU where a NIC, and rlbd, count 1514): that is added back.
    pub fn count_off_pct(&self) -> Option<(f64, f64)> {
        let (frames, bytes) = self.counted?;
        let off = |x: u64, of: u64| 100.0 * (x as f64 - of as f64) / of.max(1) as f64;
        let wire_bytes = self.wire_bytes + ETH_HDR * self.wire;
        Some((off(frames, self.wire), off(bytes, wire_bytes)))
    }

    pub fn gb(&self) -> f64 {
        self.bytes as f64 / 1e9
    }
}

/// Bulk TCP's two ends, as roles of this binary: `Some(exit code)` for a `gro-` role.
pub fn role_main(args: &[String]) -> Option<i32> {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let get = |k: &str| kv(words.iter().copied(), k);
    let cpu: usize = get("cpu").and_then(|v| v.parse().ok()).unwrap_or(RX_CPU);
    let result = match words.first().copied() {
        Some("gro-sink") => pin(cpu).and_then(|()| sink()),
        Some("gro-send") => {
            let secs: f64 = get("secs").and_then(|v| v.parse().ok()).unwrap_or(2.0);
            pin(cpu).and_then(|()| send(get("to").unwrap_or(SRV_IP), secs))
        }
        _ => return None,
    };
    Some(match result {
        Ok(line) => {
            println!("result {line}");
            0
        }
        Err(e) => {
            eprintln!("GRO bench {}: {e}", words[0]);
            1
        }
    })
}

fn pin(cpu: usize) -> Res<()> {
    pin_to_cpu(cpu).map_err(|e| e.to_string())
}

/// Accepts one connection and reads it to its end; prints the bytes, then waits for stdin to
/// close (the bench reads this process's counters meanwhile).
fn sink() -> Res<String> {
    let l = TcpListener::bind(("0.0.0.0", PORT)).map_err(|e| format!("listen: {e}"))?;
    println!("ready");
    let _ = std::io::stdout().flush();
    let (mut s, _) = l.accept().map_err(|e| format!("accept: {e}"))?;
    let mut buf = vec![0u8; CHUNK];
    let mut n = 0u64;
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => n += k as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    println!("got bytes={n}");
    let _ = std::io::stdout().flush();
    let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
    Ok(format!("bytes={n}"))
}

/// Writes to the sink for `secs` seconds.
fn send(to: &str, secs: f64) -> Res<String> {
    let mut s = TcpStream::connect((to, PORT)).map_err(|e| format!("connect {to}: {e}"))?;
    let buf = vec![0x5au8; CHUNK];
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut n = 0u64;
    while Instant::now() < end {
        s.write_all(&buf).map_err(|e| format!("write: {e}"))?;
        n += CHUNK as u64;
    }
    s.shutdown(Shutdown::Write)
        .map_err(|e| format!("shutdown: {e}"))?;
    Ok(format!("bytes={n}"))
}

/// A role of this binary in a namespace, after its `ready`; killed on drop.
struct Role {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Role {
    fn start(ns: &str, args: &[String]) -> Res<Role> {
        let me = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(&me)
            .arg(ROLE_ARG)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", args[0]))?;
        let lines = lines_of(child.stdout.take().expect("piped stdout"));
        let role = Role { child, lines };
        expect_line(&role.lines, "ready", Duration::from_secs(10))?;
        Ok(role)
    }

    /// `ip netns exec` executes the role in its own process: the pid is the role's.
    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Closes stdin and returns the `result` line.
    fn finish(mut self) -> Res<String> {
        drop(self.child.stdin.take());
        expect_line(&self.lines, "result ", Duration::from_secs(20))
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a run measures: the path without rlbd; with it, untimed (the whole-path difference
/// judges); with it and the kernel timing each program run (the breakdown).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Without,
    With,
    Timed,
}

/// One MTU's runs in a round: the pair without and with rlbd next to each other in an order
/// that alternates by round, the timed run (in the first `timed_rounds` only) outside them.
fn kinds(round: usize, timed_rounds: usize) -> Vec<Kind> {
    let mut v = vec![Kind::Without, Kind::With];
    if round < timed_rounds {
        v.push(Kind::Timed);
    }
    if round % 2 == 1 {
        v.reverse();
    }
    v
}

/// The counters read at both ends of a transfer.
struct Snap {
    napi: u64,
    sink: u64,
    daemon: u64,
    progs: HashMap<u64, (u64, u64)>,
    busy: u64,
    rx: (u64, u64),
}

impl Snap {
    fn take(lab: &Lab, napi: &[i32], sink: &Role, daemon: Option<&Role>) -> Snap {
        Snap {
            napi: napi.iter().map(|&t| task_ns(t)).sum(),
            sink: process_ns(sink.pid()),
            daemon: daemon.map_or(0, |d| process_ns(d.pid())),
            progs: daemon.map_or_else(HashMap::new, |d| programs(d.pid())),
            busy: cpu_busy_ns(RX_CPU),
            rx: dev_rx(sink.pid(), &lab.srv_if),
        }
    }
}

fn one_run(lab: &Lab, napi: &[i32], mtu: u32, kind: Kind, secs: f64, round: usize) -> Res<Run> {
    check_stop()?;
    let (with_rlbd, timed) = (kind != Kind::Without, kind == Kind::Timed);
    let _stats = timed.then(|| BpfStats::set(true)).transpose()?;
    let daemon = match with_rlbd {
        true => Some(Role::start(
            &lab.srv,
            &[
                "recv-rlbd".into(),
                format!("iface={}", lab.srv_if),
                "sampling=ebpf-tc".into(),
                "per-client=1".into(),
                format!("cpu={RX_CPU}"),
            ],
        )?),
        false => None,
    };
    let sink = Role::start(&lab.srv, &["gro-sink".into(), format!("cpu={RX_CPU}")])?;
    let profile = match profiled() {
        true => {
            let mut tids = napi.to_vec();
            tids.extend(std::iter::once(&sink).chain(&daemon).map(Role::pid));
            Some(Profile::start_tasks(&tids, TX_CPU, &lab.srv_if)?)
        }
        false => None,
    };
    let t0 = Instant::now();
    let before = Snap::take(lab, napi, &sink, daemon.as_ref());
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new("ip")
        .args(["netns", "exec", &lab.cli])
        .arg(&me)
        .args([ROLE_ARG, "gro-send", &format!("to={SRV_IP}")])
        .args([format!("secs={secs}"), format!("cpu={TX_CPU}")])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run the sender: {e}"))?;
    if !out.status.success() {
        return Err(format!("the sender failed ({})", out.status));
    }
    let got = expect_line(&sink.lines, "got ", Duration::from_secs(20))?;
    let after = Snap::take(lab, napi, &sink, daemon.as_ref());
    let elapsed = t0.elapsed().as_secs_f64();
    let bytes = kv(got.split_whitespace(), "bytes")
        .and_then(|b| b.parse().ok())
        .unwrap_or(0);
    let (ingress, egress) = program_deltas(&before.progs, &after.progs);
    let run = Run {
        round,
        mtu,
        rlbd: with_rlbd,
        timed,
        bytes,
        secs: elapsed,
        wire: after.rx.1.saturating_sub(before.rx.1),
        wire_bytes: after.rx.0.saturating_sub(before.rx.0),
        counted: None,
        napi_ns: after.napi.saturating_sub(before.napi),
        sink_ns: after.sink.saturating_sub(before.sink),
        daemon_ns: after.daemon.saturating_sub(before.daemon),
        ingress,
        egress,
        cpu_busy_ns: after.busy.saturating_sub(before.busy),
        perf: profile.map(gro_perf::finish).transpose()?,
    };
    sink.finish()?;
    let mut run = run;
    if let Some(d) = daemon {
        run.counted = Some(counted(&d.finish()?)?);
    }
    if timed && run.ingress.1 == 0 {
        return Err("rlbd's programs ran no packet: no statistics?".into());
    }
    Ok(run)
}

/// From the receiver's `result` line: the frames it counted, and the bytes (the sum of its
/// per-client estimates, `est=mac/bytes,...`).
fn counted(result: &str) -> Res<(u64, u64)> {
    let frames = kv(result.split_whitespace(), "counted").and_then(|v| v.parse().ok());
    let bytes = kv(result.split_whitespace(), "est").map(|est| {
        est.split(',')
            .filter_map(|e| e.rsplit_once('/')?.1.parse::<u64>().ok())
            .sum()
    });
    match (frames, bytes) {
        (Some(f), Some(b)) => Ok((f, b)),
        _ => Err(format!("rlbd's receiver reported no counts: {result}")),
    }
}

/// Where rlbd's count of a run is further than 1% from the veth's receive counters (the kernel
/// lab's bound for a NIC): which, and by how much.
fn count_error(r: &Run) -> Option<String> {
    let (frames, bytes) = r.counted?;
    let (df, db) = r.count_off_pct()?;
    (df.abs() > 1.0 || db.abs() > 1.0).then(|| {
        format!(
            "at {} MTU rlbd counted {frames} frames and {bytes} bytes where the veth received              {} and {} ({df:+.2}%, {db:+.2}%)",
            r.mtu, r.wire, r.wire_bytes
        )
    })
}

fn env_num(key: &str, default: f64) -> f64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n: &f64| *n > 0.0)
        .unwrap_or(default)
}

/// The rounds: `RLBD_BENCH_GRO_ROUNDS` at least (each with a timed run per MTU), then more
/// (pairs only) until the whole-path difference's 90% interval is at most
/// `RLBD_BENCH_GRO_SETTLE` points wide at both MTUs, up to `RLBD_BENCH_GRO_MAX_ROUNDS`.
/// `RLBD_BENCH_GRO_SHORT=1` (CI): 5 rounds of 1 s runs, no more.
struct Plan {
    rounds: usize,
    max_rounds: usize,
    settle: f64,
    secs: f64,
}

impl Plan {
    fn from_env() -> Plan {
        let short = std::env::var("RLBD_BENCH_GRO_SHORT").as_deref() == Ok("1");
        let rounds = env_num("RLBD_BENCH_GRO_ROUNDS", if short { 5.0 } else { 8.0 }) as usize;
        let max = if short { rounds } else { 3 * rounds };
        Plan {
            rounds,
            max_rounds: (env_num("RLBD_BENCH_GRO_MAX_ROUNDS", max as f64) as usize).max(rounds),
            settle: env_num("RLBD_BENCH_GRO_SETTLE", 2.0),
            secs: env_num("RLBD_BENCH_GRO_SECS", if short { 1.0 } else { 2.0 }),
        }
    }
}

fn bench() -> Res<GroFigures> {
    wait_for_other_labs()?;
    let plan = Plan::from_env();
    // Off but in the timed runs: the kernel's timing is a cost on the measured path.
    let _stats = BpfStats::set(false)?;
    let cost = gro_cost::measure()?;
    let lab = Lab::create()?;
    let started = Instant::now();
    println!(
        "\nGRO benchmark: bulk TCP for {} s per run from {} to {} over a veth, GRO on the \
         server's end in a NAPI thread; receive side on CPU {RX_CPU}, sender on CPU {TX_CPU}; \
         {} to {} round(s), each MTU without and with rlbd's counting (and, in the first {}, \
         with it timed by the kernel); load average {}",
        plan.secs,
        lab.cli,
        lab.srv,
        plan.rounds,
        plan.max_rounds,
        plan.rounds,
        super::load_average()
    );
    let mut runs = Vec::new();
    let mut round = 0;
    while round < plan.rounds
        || (round < plan.max_rounds && !gro_report::settled(&runs, plan.settle))
    {
        wait_for_quiet()?;
        for mtu in MTUS {
            lab.set_mtu(mtu)?;
            let napi = lab.napi_threads()?;
            for kind in kinds(round, plan.rounds) {
                let run = one_run(&lab, &napi, mtu, kind, plan.secs, round)?;
                gro_report::print_run(round + 1, &run);
                if let Some(e) = count_error(&run) {
                    return Err(e);
                }
                runs.push(run);
            }
        }
        round += 1;
    }
    drop(lab);
    let figures = gro_report::print(&runs, round, plan.secs, plan.settle, cost);
    println!(
        "GRO benchmark took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(figures)
}

/// `RLBD_BENCH_GRO_PERF=1` (and perf there): every run profiled as well (`gro_perf.rs`).
fn profiled() -> bool {
    std::env::var("RLBD_BENCH_GRO_PERF").as_deref() == Ok("1") && profile::available()
}

/// The GRO part of the namespace benchmarks (see the top of this file).
pub fn main() {
    if !is_root() {
        println!("GRO benchmark: skipped, needs root (network namespaces, tc, eBPF)");
        return;
    }
    let _ = rlbd_lab::netns::stop_flag();
    match gro_setup::ensure("ethtool", "ethtool").and_then(|()| bench()) {
        Ok(f) => {
            let _ = FIGURES.set(f);
            if let Some(f) = figures() {
                println!("{}", f.line());
            }
        }
        Err(e) => {
            eprintln!("GRO benchmark failed: {e}");
            std::process::exit(1);
        }
    }
}
