//! Capture hot path costs: parsing a captured frame, accounting it in the client table (hits,
//! and misses that evict under a flood of new MACs), and the once-a-second roll-over.
//!
//! Under `cargo bench` (root) the namespace benchmarks follow the micro-benchmarks: the idle
//! daemon's CPU against the number of links on the host (`idle`), then a real flood over a veth
//! counted by rlbd's capture path, exact, sampled and in the kernel (eBPF), and by a naive
//! pnet_datalink receiver
//! (`ns`). The last line is the `capture-summary:`. `cargo test` (which runs this binary without
//! `--bench`) never runs them. `RLBD_BENCH_NS=0` skips them, `RLBD_BENCH_NS=only` runs only them;
//! `RLBD_BENCH_IDLE=0` skips the idle part, `RLBD_BENCH_NS_RUNS=0` the flood part,
//! `RLBD_BENCH_NS_ROUNDS` sets the rounds of the flood part (default 3), `RLBD_BENCH_WAIT=0`
//! skips the waits for other labs and quiet CPUs (a quick, noisy look), `RLBD_BENCH_ROWS=a,b` runs
//! only the flood rows whose names contain one of those strings (and the baseline),
//! `RLBD_BENCH_BPF_STATS=1` has the kernel time the counting program (`prog_ns` per run),
//! `RLBD_BENCH_PAIRED=0` measures each kernel share against the round's one baseline instead of
//! a baseline run just before it, `RLBD_BENCH_TC_ONE_IN=N` sets the fixed ratio of the sampled
//! tc rows `(z16)` and `(w16)` (16 by default; `(z)` and `(w)` sample as the daemon does). Before them, bulk TCP with GRO into a server namespace, with
//! and without rlbd's counting (`gro`: what counting costs per byte received);
//! `RLBD_BENCH_GRO=0` skips it, `RLBD_BENCH_GRO=only` runs it alone of the namespace parts.

use std::hint::black_box;
use std::net::Ipv4Addr;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use rlbd::capture::ebpf::{Delta, EntryKey};
use rlbd::capture::{parse, ClientTable, Frame, Mac};

mod baselines;
mod gro;
mod gro_cost;
mod gro_lab;
mod gro_perf;
mod gro_report;
mod gro_setup;
mod idle;
mod lab;
mod model;
mod ns;
mod plan;
mod profile;
mod recv;
mod report;

pub const ROLE_ARG: &str = "--rlbd-ns-role";
pub const TX_MAC: &str = "02:52:4c:42:be:01";
pub const RX_MAC: Mac = Mac(0x02, 0x52, 0x4c, 0x42, 0xbe, 0x02);
pub const RX_CPU: usize = 0;
pub const TX_CPU: usize = 1;

pub type Res<T> = Result<T, String>;

/// `key=value` arguments and result lines.
pub fn kv<'a>(words: impl IntoIterator<Item = &'a str>, key: &str) -> Option<&'a str> {
    words
        .into_iter()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn mac(i: u32) -> Mac {
    let b = i.to_be_bytes();
    Mac::from([0x02, 0x00, b[0], b[1], b[2], b[3]])
}

/// A 96-byte capture (snap length) of an IPv4 frame from `src` to the server.
pub fn frame96(src: Mac) -> Vec<u8> {
    frame(src)
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
        t.account(
            src_mac.into(),
            src_ip.into(),
            dst_ip.into(),
            1,
            1514,
            tick,
            |_| true,
        );
    }
}

fn bench(c: &mut Criterion) {
    let f = frame(mac(7));
    c.bench_function("parse ipv4 (96-byte capture)", |b| {
        b.iter(|| parse(black_box(&f)))
    });
    parse_and_account(c);
    let order = shuffled(65_536);
    kernel_counts(c, &order);
    slot_reading(c);
    roll_over(c, &order);
}

/// The daemon's per-frame work on captured frames: hits, round robins through a table too small
/// for its sources (every frame a miss that evicts) or just big enough, and new clients only.
fn parse_and_account(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse + account");
    // The namespace benchmark's churn cases without the ring: 10,000 sources in turn through
    // the default table, and 65,536 in a table of 65,536.
    let cases = [
        ("hit", 4096usize, 1000u32),
        ("hit", 65_536, 50_000),
        ("round robin", ClientTable::DEFAULT_CAPACITY, 10_000),
        ("round robin", 65_536, 65_536),
    ];
    for (what, cap, clients) in cases {
        let frames: Vec<Vec<u8>> = (0..clients).map(|i| frame(mac(i))).collect();
        let mut t = ClientTable::new(cap, 60);
        let mut i = 0usize;
        g.bench_with_input(
            BenchmarkId::new(what, format!("{cap}/{clients}")),
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
                mac(n).into(),
                Ipv4Addr::new(198, 18, 1, 2).into(),
                Ipv4Addr::new(198, 18, 0, 1).into(),
                0,
                60,
                0,
                |_| true,
            );
        })
    });
    g.finish();
}

/// 0..n in an order unrelated to the table's (a fixed shuffle: the same every run).
fn shuffled(n: u32) -> Vec<u32> {
    let mut order: Vec<u32> = (0..n).collect();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..order.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
}

/// Counting in the kernel: once a second every client's count since the last reading, in the
/// maps' order (`order`: their hash's, unrelated to the table's), from two ports, fed the way
/// the daemon feeds them. One iteration is a whole second's reading; criterion's time per
/// element is the cost per client.
fn kernel_counts(c: &mut Criterion, order: &[u32]) {
    let counts: Vec<(usize, Delta)> = order
        .iter()
        .map(|&i| {
            let key = EntryKey {
                client: mac(i).into(),
                dst: Ipv4Addr::new(198, 18, 0, 1).into(),
            };
            let src = Some(Ipv4Addr::new(198, 18, 1, 2).into());
            let d = Delta {
                key,
                frames: 3,
                bytes: 4542,
                src,
            };
            ((i & 1) as usize, d)
        })
        .collect();
    let mut t = ClientTable::new(65_536, 60);
    let mut tick = 0u64;
    let mut g = c.benchmark_group("kernel counts");
    g.throughput(Throughput::Elements(counts.len() as u64));
    g.bench_function("a second of 65536 clients on two ports", |b| {
        b.iter(|| {
            tick += 1;
            t.account_kernel_counts(&counts, tick, |_| true);
        })
    });
    g.finish();
}

/// The table's roll-over with 65,536 live clients that came in one order (their slots') and
/// were last seen in another (`order`: the kernel's counts come in its hash's order).
fn roll_over(c: &mut Criterion, order: &[u32]) {
    let mut t = ClientTable::new(65_536, 1 << 40);
    for (tick, i) in (0..65_536)
        .map(|i| (0, i))
        .chain(order.iter().map(|&i| (1, i)))
    {
        t.account(
            mac(i).into(),
            Ipv4Addr::new(198, 18, 1, 2).into(),
            Ipv4Addr::new(198, 18, 0, 1).into(),
            0,
            1514,
            tick,
            |_| true,
        );
    }
    let mut tick = 1;
    c.bench_function("roll_over 65536 live", |b| {
        b.iter(|| {
            tick += 1;
            t.roll_over(tick);
        })
    });
}

/// The slot table in plain memory, for the reading's micro-benchmark: in cache lines, as the
/// map is (a slot is one line).
struct SlotMem(Vec<Line>);

#[repr(C, align(64))]
struct Line([std::sync::atomic::AtomicU64; 8]);

impl SlotMem {
    fn word(&self, at: usize) -> Option<&std::sync::atomic::AtomicU64> {
        self.0.get(at / 64).map(|l| &l.0[at % 64 / 8])
    }
}

impl rlbd::capture::ebpf::slots::SlotMemory for SlotMem {
    fn load(&self, at: usize) -> u64 {
        self.word(at)
            .map_or(0, |w| w.load(std::sync::atomic::Ordering::Acquire))
    }
    fn store(&self, at: usize, v: u64) {
        if let Some(w) = self.word(at) {
            w.store(v, std::sync::atomic::Ordering::Release);
        }
    }
}

/// Counting in the kernel at 65,536 clients: the daemon's reading of the largest slot table
/// once a second, a quarter of its slots taken (where the program's hash put them), each
/// having counted since the last reading (the counts are added before each reading, not
/// timed). Criterion's time per element is the cost per client.
fn slot_reading(c: &mut Criterion) {
    use rlbd::capture::ebpf::map::encode_key;
    use rlbd::capture::ebpf::slots::{
        map_bytes, SlotMemory, SlotReader, MAX_SLOTS, SLOT_FRAMES, SLOT_SIZE, SLOT_SRC,
    };
    let slots = MAX_SLOTS as usize;
    let mem = SlotMem(
        (0..map_bytes(MAX_SLOTS) / 64)
            .map(|_| Line(Default::default()))
            .collect(),
    );
    let mut taken = Vec::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in 0..65_536u32 {
        let key = EntryKey {
            client: mac(i).into(),
            dst: Ipv4Addr::new(198, 18, 0, 1).into(),
        };
        let k = encode_key(&key);
        let mut at;
        loop {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            at = (x as usize % slots) * SLOT_SIZE;
            if mem.load(at) == 0 {
                break;
            }
        }
        for w in 0..3 {
            mem.store(
                at + w * 8,
                u64::from_ne_bytes(k[w * 8..w * 8 + 8].try_into().unwrap()),
            );
        }
        let src = Ipv4Addr::from(0xc612_0000 | i).to_ipv6_mapped().octets();
        for w in 0..2 {
            mem.store(
                at + SLOT_SRC + w * 8,
                u64::from_ne_bytes(src[w * 8..w * 8 + 8].try_into().unwrap()),
            );
        }
        taken.push(at);
    }
    taken.sort_unstable();
    let mut reader = SlotReader::new(MAX_SLOTS);
    let mut out: Vec<Delta> = Vec::new();
    // The first reading finds every client new; the bench times the ones after it.
    reader.read(&mem, &mut out);
    let mut g = c.benchmark_group("kernel counts");
    g.throughput(Throughput::Elements(taken.len() as u64));
    g.bench_function("reading 65536 taken of 262144 slots", |b| {
        b.iter_batched(
            || {
                for &at in &taken {
                    let f = mem.load(at + SLOT_FRAMES);
                    mem.store(at + SLOT_FRAMES, f + 3);
                }
            },
            |()| {
                out.clear();
                black_box(reader.read(&mem, &mut out));
            },
            criterion::BatchSize::PerIteration,
        )
    });
    g.finish();
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
    if args.get(1).map(String::as_str) == Some(ROLE_ARG) {
        let rc = gro::role_main(&args[2..]).unwrap_or_else(|| recv::role_main(&args[2..]));
        std::process::exit(rc);
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
        let gro = std::env::var("RLBD_BENCH_GRO").unwrap_or_default();
        if gro != "0" {
            gro::main();
        }
        if gro != "only" {
            ns::main();
        }
    }
}
