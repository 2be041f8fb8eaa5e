//! Planner cost at the paper's worst case (20 slaves x 256 clients) and far beyond it
//! (64 x 65,536). Targets: under 20 µs and under 20 ms. Prints figures; asserts nothing on time.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rlbd::policy::{plan, ClientView, PolicyConfig, PortView};

/// Deterministic pseudo-random load: half the ports overloaded, rates spread over three decades.
fn scenario(ports: usize, clients: usize) -> (Vec<PortView>, Vec<ClientView>) {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let cap = 10e9;
    let cs: Vec<ClientView> = (0..clients)
        .map(|_| {
            let r = next();
            // Even ports are the hot ones: they get three times the clients.
            let port = ((r % (ports as u64 * 2)) as usize % ports) & !1usize.min(ports - 1);
            let port = if r % 4 == 0 {
                (r as usize >> 8) % ports
            } else {
                port
            };
            let rate = 1e5 * 10f64.powf((next() % 3000) as f64 / 1000.0);
            ClientView {
                port,
                rate_bps: rate,
                held: next() % 10 == 0,
                fixed: false,
                since_move: None,
                last_move: None,
            }
        })
        .collect();
    let ps = (0..ports)
        .map(|p| {
            let rx: f64 = cs.iter().filter(|c| c.port == p).map(|c| c.rate_bps).sum();
            PortView {
                capacity_bps: cap,
                up: p != 1,
                rx_bps: rx,
                overloaded: rx > 0.8 * cap || p % 2 == 0,
                resolution_bps: 0.0,
            }
        })
        .collect();
    (ps, cs)
}

fn bench(c: &mut Criterion) {
    let cfg = PolicyConfig::default();
    let mut g = c.benchmark_group("plan");
    for (ports, clients) in [(20usize, 256usize), (64, 65_536)] {
        let (ps, cs) = scenario(ports, clients);
        let n = plan(&cfg, &ps, &cs).len();
        println!("plan {ports} ports x {clients} clients: {n} moves per round");
        g.bench_with_input(
            BenchmarkId::from_parameter(format!("{ports}x{clients}")),
            &(ps, cs),
            |b, (ps, cs)| b.iter(|| plan(&cfg, std::hint::black_box(ps), std::hint::black_box(cs))),
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
