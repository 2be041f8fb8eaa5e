//! The table against a naive model under random operations (proptest): the same entries, the
//! same order, the same evictions.

use super::tests::{bare, check, cip, m, SIP};
use super::*;
use crate::capture::frame::{parse, Frame};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Account(u8, u32, u64),
    Remove(u8),
    Roll(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<u8>(), any::<u32>(), 0u64..3).prop_map(|(k, l, d)| Op::Account(k, l, d)),
        1 => any::<u8>().prop_map(Op::Remove),
        1 => (0u64..4).prop_map(Op::Roll),
    ]
}

proptest! {
    /// Random byte vectors through `parse` and into the table: no panic, bounded size.
    #[test]
    fn parse_then_account_never_panics(
        frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..128), 0..64),
        cap in 1usize..16,
    ) {
        let mut t = ClientTable::new(cap, 2);
        for (i, f) in frames.iter().enumerate() {
            let tick = i as u64 / 8;
            match parse(f) {
                Some(Frame::Ipv4 { src_mac, src_ip, dst_ip, .. }) => {
                    t.account(src_mac.into(), src_ip.into(), dst_ip.into(), (i % 3) as u16, f.len() as u64, tick, |_| true)
                }
                Some(Frame::Arp { sha, spa, tpa, .. }) => {
                    t.account(sha.into(), spa.into(), tpa.into(), 0, f.len() as u64, tick, |_| true)
                }
                Some(Frame::Ipv6 { src_mac, src_ip, dst_ip, .. }) => {
                    t.account(src_mac.into(), src_ip.into(), dst_ip.into(), 1, f.len() as u64, tick, |_| true)
                }
                Some(Frame::Nd { .. }) | None => {}
            }
            if i % 8 == 7 {
                t.roll_over(tick + 1);
            }
            prop_assert!(t.len() <= t.capacity());
        }
        check(&t);
    }

    /// Random well-formed frames (so the table actually fills) through parse + account.
    #[test]
    fn wellformed_frames_fill_table(
        keys in proptest::collection::vec((any::<u8>(), 14usize..1514), 0..200),
        cap in 1usize..32,
    ) {
        use crate::capture::frame::tests::{ipv4_frame, SERVER_MAC, SERVER_IP};
        let mut t = ClientTable::new(cap, 0);
        for (k, len) in &keys {
            let f = ipv4_frame(m(u32::from(*k)), SERVER_MAC, cip(u32::from(*k)), SERVER_IP, false, *len);
            if let Some(Frame::Ipv4 { src_mac, src_ip, dst_ip, .. }) = parse(&f[..f.len().min(96)]) {
                t.account(src_mac.into(), src_ip.into(), dst_ip.into(), 0, *len as u64, 0, |_| true);
            }
            prop_assert!(t.len() <= t.capacity());
        }
        check(&t);
    }

    /// The table matches a naive model (a Vec in LRU order) under random operations.
    #[test]
    fn matches_naive_model(ops in proptest::collection::vec(op(), 0..300), cap in 1usize..12) {
        let mut t = ClientTable::new(cap, 3);
        let mut model: Vec<ClientEntry> = Vec::new(); // most recent first
        let mut evictions = 0u64;
        let mut now = 0u64;
        let mut last_roll: Option<u64> = None;
        for op in ops {
            match op {
                Op::Account(k, len, dt) => {
                    now += dt;
                    // Few distinct keys, so hits, evictions and probe collisions all happen.
                    let mac = m(u32::from(k % 24));
                    t.account(mac.into(), cip(u32::from(k)).into(), SIP.into(), u16::from(k), u64::from(len), now, |_| true);
                    if let Some(i) = model.iter().position(|e| e.key.mac == mac) {
                        // Moved to the front on its first frame of a tick only.
                        let mut e = if model[i].last_seen == now { model[i] } else { model.remove(i) };
                        e.ip = cip(u32::from(k));
                        e.port = u16::from(k);
                        e.bytes_this_second = e.bytes_this_second.saturating_add(u64::from(len));
                        if e.last_seen == now {
                            model[i] = e;
                        } else {
                            e.last_seen = now;
                            model.insert(0, e);
                        }
                    } else {
                        if model.len() == cap {
                            model.pop();
                            evictions += 1;
                        }
                        model.insert(0, ClientEntry {
                            key: mac.into(), ip: cip(u32::from(k)), ip6: None, servers: ServerSet::default(),
                            port: u16::from(k),
                            bytes_this_second: u64::from(len), rate: 0, last_seen: now,
                        });
                    }
                }
                Op::Remove(k) => {
                    let mac = m(u32::from(k % 24));
                    let want = model.iter().position(|e| e.key.mac == mac).map(|i| model.remove(i));
                    prop_assert_eq!(t.remove(&mac.into()).map(bare), want.map(bare));
                }
                Op::Roll(dt) => {
                    now += dt;
                    t.roll_over(now);
                    model.retain(|e| now - e.last_seen < 3);
                    let elapsed = last_roll.map_or(1, |p: u64| (now - p).max(1));
                    last_roll = Some(now);
                    for e in &mut model {
                        e.rate = e.bytes_this_second / elapsed;
                        e.bytes_this_second = 0;
                    }
                }
            }
            // The server addresses are ServerSet's business (tested there).
            let got: Vec<ClientEntry> = t.iter().copied().map(bare).collect();
            let want: Vec<ClientEntry> = model.iter().copied().map(bare).collect();
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(t.evictions(), evictions);
            // The same entries in the slots' order: the live ones, each once.
            let mut unordered: Vec<ClientEntry> = t.iter_unordered().copied().map(bare).collect();
            let mut want = want;
            unordered.sort_by_key(|e| e.key.as_u64());
            want.sort_by_key(|e| e.key.as_u64());
            prop_assert_eq!(unordered, want);
        }
        check(&t);
    }
}
