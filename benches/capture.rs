//! Capture hot path costs: parsing a captured frame, accounting it in the client table (hits,
//! and misses that evict under a flood of new MACs), and the once-a-second roll-over.

use std::hint::black_box;
use std::net::Ipv4Addr;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rlbd::capture::{parse, ClientTable, Frame, Mac};

fn mac(i: u32) -> Mac {
    let b = i.to_be_bytes();
    [0x02, 0x00, b[0], b[1], b[2], b[3]]
}

/// A 96-byte capture (snap length) of an IPv4 frame from `src` to the server.
fn frame(src: Mac) -> Vec<u8> {
    let mut f = vec![0u8; 96];
    f[0..6].copy_from_slice(&[0x02, 0xaa, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&src);
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
criterion_main!(benches);
