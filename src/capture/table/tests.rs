//! Tests of `table.rs`: behaviour, structural invariants, and a naive model under random
//! operations.

use super::*;
use crate::Mac;
use std::net::Ipv6Addr;

pub(super) const SIP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

pub(super) fn m(i: u32) -> Mac {
    let b = i.to_be_bytes();
    Mac::from([0x02, 0x00, b[0], b[1], b[2], b[3]])
}

pub(super) fn cip(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 0, 0)) + (i & 0x1_ffff))
}

pub(super) fn bare(e: ClientEntry) -> ClientEntry {
    ClientEntry {
        servers: ServerSet::default(),
        ..e
    }
}

fn macs(t: &ClientTable) -> Vec<Mac> {
    t.iter().map(|e| e.key.mac).collect()
}

/// Structural invariants: list and index agree, every key findable, no duplicates.
pub(super) fn check(t: &ClientTable) {
    assert!(t.len() <= t.capacity());
    let fwd: Vec<u32> = {
        let mut v = Vec::new();
        let mut s = t.head;
        while s != NIL {
            v.push(s);
            s = t.slots[s as usize].next;
        }
        v
    };
    assert_eq!(fwd.len(), t.len());
    let mut back = Vec::new();
    let mut s = t.tail;
    while s != NIL {
        back.push(s);
        s = t.slots[s as usize].prev;
    }
    back.reverse();
    assert_eq!(fwd, back);
    let used = t.index.iter().filter(|b| b.slot != NIL).count();
    assert_eq!(used, t.len());
    for &s in &fwd {
        let key = t.slots[s as usize].entry.key;
        assert_eq!(t.find(&key, t.tag(&key)).map(|x| x.1), Some(s));
    }
    assert_eq!(t.iter().len(), t.len());
}

#[test]
fn insert_lookup_update() {
    let mut t = ClientTable::new(8, 0);
    assert!(t.is_empty());
    t.account(m(1).into(), cip(1).into(), SIP.into(), 0, 100, 10, |_| true);
    t.account(m(2).into(), cip(2).into(), SIP.into(), 1, 200, 10, |_| true);
    t.account(
        m(1).into(),
        cip(3).into(),
        Ipv4Addr::new(198, 18, 0, 2).into(),
        1,
        50,
        11,
        |_| true,
    );
    let e = t.get(&m(1).into()).unwrap();
    assert_eq!(e.ip, cip(3));
    assert_eq!(e.key, ClientKey::untagged(m(1)));
    assert_eq!(
        e.servers.iter().collect::<Vec<_>>(),
        vec![IpAddr::from(SIP), Ipv4Addr::new(198, 18, 0, 2).into()],
        "both server addresses it sent to"
    );
    assert_eq!(e.port, 1);
    assert_eq!(e.bytes_this_second, 150);
    assert_eq!(e.last_seen, 11);
    assert_eq!(t.get(&m(2).into()).unwrap().bytes_this_second, 200);
    assert_eq!(t.get(&m(3).into()), None);
    assert_eq!(t.len(), 2);
    assert_eq!(macs(&t), vec![m(1), m(2)]);
    check(&t);
}

#[test]
fn dual_stack_client_is_one_entry() {
    let mut t = ClientTable::new(8, 0);
    let c6: Ipv6Addr = "2001:db8:77::11".parse().unwrap();
    let s6: Ipv6Addr = "2001:db8:77::1".parse().unwrap();
    // IPv6 first: a new entry without IPv4 addresses.
    t.account(m(1).into(), c6.into(), s6.into(), 1, 100, 1, |_| true);
    let e = t.get(&m(1).into()).unwrap();
    assert_eq!(e.ip, Ipv4Addr::UNSPECIFIED);
    assert_eq!((e.ip6, e.servers.last()), (Some(c6), Some(s6.into())));
    // Then IPv4 from the same MAC: the same entry, both families kept, bytes summed.
    t.account(m(1).into(), cip(1).into(), SIP.into(), 0, 50, 2, |_| true);
    t.account(m(2).into(), cip(2).into(), SIP.into(), 0, 10, 2, |_| true);
    t.account(m(1).into(), c6.into(), s6.into(), 1, 25, 2, |_| true);
    let e = t.get(&m(1).into()).unwrap();
    assert_eq!(e.ip, cip(1));
    assert_eq!(e.ip6, Some(c6));
    assert_eq!(
        e.servers.iter().collect::<Vec<_>>(),
        vec![IpAddr::from(s6), SIP.into()]
    );
    assert_eq!((e.port, e.bytes_this_second, e.last_seen), (1, 175, 2));
    assert_eq!(t.get(&m(2).into()).unwrap().ip6, None);
    assert_eq!(t.len(), 2);
    // Within a tick the order is that of the first frames: m(2) came after m(1)'s first.
    assert_eq!(macs(&t), vec![m(2), m(1)]);
    t.account(m(1).into(), c6.into(), s6.into(), 1, 25, 3, |_| true);
    assert_eq!(
        macs(&t),
        vec![m(1), m(2)],
        "a new tick moves it to the front"
    );
    check(&t);
}

#[test]
fn lru_eviction_order_and_count() {
    let mut t = ClientTable::new(3, 0);
    for i in 1..=3 {
        t.account(m(i).into(), cip(i).into(), SIP.into(), 0, 1, 1, |_| true);
    }
    // Touch 1: order is now 1, 3, 2 (2 is least recent).
    t.account(m(1).into(), cip(1).into(), SIP.into(), 0, 1, 2, |_| true);
    assert_eq!(macs(&t), vec![m(1), m(3), m(2)]);
    t.account(m(4).into(), cip(4).into(), SIP.into(), 0, 1, 3, |_| true);
    assert_eq!(macs(&t), vec![m(4), m(1), m(3)]);
    assert_eq!(t.evictions(), 1);
    assert!(t.get(&m(2).into()).is_none());
    t.account(m(5).into(), cip(5).into(), SIP.into(), 0, 1, 3, |_| true);
    assert_eq!(macs(&t), vec![m(5), m(4), m(1)]);
    assert_eq!(t.evictions(), 2);
    // A get does not refresh.
    assert!(t.get(&m(1).into()).is_some());
    t.account(m(6).into(), cip(6).into(), SIP.into(), 0, 1, 4, |_| true);
    assert!(t.get(&m(1).into()).is_none());
    assert_eq!(t.evictions(), 3);
    assert_eq!(t.len(), 3);
    check(&t);
}

#[test]
fn capacity_one_and_clamp() {
    let mut t = ClientTable::new(0, 0);
    assert_eq!(t.capacity(), 1);
    t.account(m(1).into(), cip(1).into(), SIP.into(), 0, 1, 1, |_| true);
    t.account(m(2).into(), cip(2).into(), SIP.into(), 0, 1, 1, |_| true);
    assert_eq!(macs(&t), vec![m(2)]);
    assert_eq!(t.evictions(), 1);
    check(&t);
}

#[test]
fn roll_over_rates() {
    let mut t = ClientTable::new(16, 0);
    t.account(m(1).into(), cip(1).into(), SIP.into(), 0, 1000, 0, |_| true);
    t.account(m(1).into(), cip(1).into(), SIP.into(), 0, 500, 0, |_| true);
    t.account(m(2).into(), cip(2).into(), SIP.into(), 1, 64, 0, |_| true);
    t.roll_over(1);
    assert_eq!(t.get(&m(1).into()).unwrap().rate, 1500);
    assert_eq!(t.get(&m(1).into()).unwrap().bytes_this_second, 0);
    assert_eq!(t.get(&m(2).into()).unwrap().rate, 64);
    t.account(m(2).into(), cip(2).into(), SIP.into(), 1, 100, 1, |_| true);
    t.roll_over(2);
    assert_eq!(t.get(&m(1).into()).unwrap().rate, 0);
    assert_eq!(t.get(&m(2).into()).unwrap().rate, 100);
    // A late roll-over averages over the ticks it covers.
    t.account(m(1).into(), cip(1).into(), SIP.into(), 0, 3000, 3, |_| true);
    t.roll_over(5);
    assert_eq!(t.get(&m(1).into()).unwrap().rate, 1000);
    // Saturates instead of overflowing.
    t.account(
        m(1).into(),
        cip(1).into(),
        SIP.into(),
        0,
        u64::MAX - 5,
        5,
        |_| true,
    );
    t.account(
        m(1).into(),
        cip(1).into(),
        SIP.into(),
        0,
        1 << 40,
        5,
        |_| true,
    );
    let e = t.get(&m(1).into()).unwrap();
    assert_eq!(e.bytes_this_second, u64::MAX);
    check(&t);
}

#[test]
fn idle_expiry_walks_from_the_tail() {
    let mut t = ClientTable::new(16, 3);
    t.account(m(1).into(), cip(1).into(), SIP.into(), 0, 1, 0, |_| true);
    t.account(m(2).into(), cip(2).into(), SIP.into(), 0, 1, 1, |_| true);
    t.account(m(3).into(), cip(3).into(), SIP.into(), 0, 1, 2, |_| true);
    t.roll_over(2);
    assert_eq!(t.len(), 3);
    t.roll_over(3); // m(1) idle for 3 ticks
    assert_eq!(macs(&t), vec![m(3), m(2)]);
    assert_eq!(t.expirations(), 1);
    t.account(m(2).into(), cip(2).into(), SIP.into(), 0, 1, 4, |_| true);
    t.roll_over(5); // m(3) idle 3, m(2) idle 1
    assert_eq!(macs(&t), vec![m(2)]);
    t.roll_over(100);
    assert!(t.is_empty());
    assert_eq!(t.expirations(), 3);
    assert_eq!(t.evictions(), 0);
    check(&t);
    // Slots are reused after expiry.
    for i in 10..26 {
        t.account(m(i).into(), cip(i).into(), SIP.into(), 0, 1, 101, |_| true);
    }
    assert_eq!(t.len(), 16);
    assert_eq!(t.slots.len(), 16);
    check(&t);
}

#[test]
fn zero_idle_never_expires() {
    let mut t = ClientTable::new(4, 0);
    t.account(m(1).into(), cip(1).into(), SIP.into(), 0, 1, 0, |_| true);
    t.roll_over(u64::MAX);
    assert_eq!(t.len(), 1);
}

#[test]
fn remove_and_reinsert() {
    let mut t = ClientTable::new(8, 0);
    for i in 0..8 {
        t.account(m(i).into(), cip(i).into(), SIP.into(), 0, 1, 1, |_| true);
    }
    assert_eq!(t.remove(&m(3).into()).unwrap().key.mac, m(3));
    assert_eq!(t.remove(&m(3).into()), None);
    assert_eq!(t.len(), 7);
    check(&t);
    t.account(m(42).into(), cip(42).into(), SIP.into(), 0, 1, 2, |_| true);
    assert_eq!(t.evictions(), 0);
    assert_eq!(t.len(), 8);
    check(&t);
}

#[test]
fn large_capacity_bound() {
    let cap = 65_536;
    let mut t = ClientTable::new(cap, 0);
    for i in 0..100_000u32 {
        t.account(
            m(i).into(),
            cip(i).into(),
            SIP.into(),
            (i % 4) as u16,
            60,
            u64::from(i / 10_000),
            |_| true,
        );
    }
    assert_eq!(t.len(), cap);
    assert_eq!(t.evictions(), 100_000 - cap as u64);
    // The newest `cap` survive, in reverse insertion order.
    let first = 100_000 - cap as u32;
    assert!(t.get(&m(first - 1).into()).is_none());
    assert!(t.get(&m(first).into()).is_some());
    assert_eq!(t.iter().next().unwrap().key.mac, m(99_999));
    assert_eq!(t.iter().last().unwrap().key.mac, m(first));
    assert_eq!(t.slots.capacity(), cap);
    check(&t);
    t.roll_over(10);
    assert!(t.iter().all(|e| e.rate == 60 && e.bytes_this_second == 0));
}

#[test]
fn one_mac_on_two_vlans_is_two_clients() {
    let mut t = ClientTable::new(8, 0);
    let (a, b) = (ClientKey::new(m(1), 100), ClientKey::new(m(1), 200));
    t.account(a, cip(1).into(), SIP.into(), 0, 100, 1, |_| true);
    t.account(b, cip(1).into(), SIP.into(), 1, 30, 1, |_| true);
    assert_eq!(t.len(), 2);
    assert_eq!(t.get(&a).unwrap().bytes_this_second, 100);
    assert_eq!(t.get(&b).unwrap().port, 1);
    assert_eq!(t.get(&ClientKey::untagged(m(1))), None);
    check(&t);
}

#[test]
fn destinations_that_are_not_the_servers_are_noted_apart() {
    let mut t = ClientTable::new(8, 60);
    let ours = |ip: IpAddr| ip == IpAddr::from(SIP);
    let elsewhere = Ipv4Addr::new(203, 0, 113, 9);
    t.account(
        m(1).into(),
        cip(1).into(),
        elsewhere.into(),
        0,
        100,
        1,
        ours,
    );
    t.account(m(1).into(), cip(1).into(), SIP.into(), 0, 100, 1, ours);
    let e = t.get(&m(1).into()).unwrap();
    assert_eq!(
        e.servers.iter().collect::<Vec<_>>(),
        vec![IpAddr::from(SIP)]
    );
    assert_eq!(e.servers.other(), Some(elsewhere.into()));
}

/// One kernel count: `bytes` from client `i` to `dst` on port `port`.
fn count(port: usize, i: u32, dst: Ipv4Addr, bytes: u64) -> (usize, Delta) {
    (
        port,
        Delta {
            key: crate::capture::ebpf::EntryKey {
                client: m(i).into(),
                dst: dst.into(),
            },
            frames: 1,
            bytes,
            src: Some(cip(i).into()),
        },
    )
}

#[test]
fn kernel_counts_put_a_client_on_the_port_of_its_largest_count_in_any_order() {
    let sip2 = Ipv4Addr::new(198, 18, 0, 2);
    // Client 1 on ports 0 and 1 (1 carried more), client 2 on three ports (2 in the middle
    // carried most), client 3 to two addresses on port 0 and a little on port 1, client 4 on
    // one port only.
    let counts = vec![
        count(0, 1, SIP, 100),
        count(1, 1, SIP, 300),
        count(0, 2, SIP, 100),
        count(2, 2, SIP, 150),
        count(1, 2, SIP, 120),
        count(0, 3, SIP, 400),
        count(0, 3, sip2, 50),
        count(1, 3, SIP, 200),
        count(2, 4, SIP, 70),
    ];
    let want = [(1, 1, 400), (2, 2, 370), (3, 0, 650), (4, 2, 70)];
    // Every rotation and the reversal: the order the ports are read in does not matter.
    let mut orders: Vec<Vec<(usize, Delta)>> = (0..counts.len())
        .map(|r| {
            let mut c = counts.clone();
            c.rotate_left(r);
            c
        })
        .collect();
    orders.push(counts.iter().rev().cloned().collect());
    for (n, c) in orders.iter().enumerate() {
        let mut t = ClientTable::new(16, 60);
        t.account_kernel_counts(c, 5, |_| true);
        check(&t);
        for (i, port, bytes) in want {
            let e = t.get(&m(i).into()).unwrap();
            assert_eq!(
                (e.port, e.bytes_this_second),
                (port, bytes),
                "order {n}, client {i}"
            );
            assert_eq!(e.ip, cip(i));
        }
        let e3 = t.get(&m(3).into()).unwrap();
        assert_eq!(e3.servers.iter().count(), 2);
    }
}

#[test]
fn kernel_counts_of_the_next_second_move_a_client_without_a_split() {
    let mut t = ClientTable::new(16, 60);
    t.account_kernel_counts(&[count(0, 1, SIP, 100)], 5, |_| true);
    t.roll_over(5);
    // Next second only port 1 counted it: it is there, whatever it drew before.
    t.account_kernel_counts(&[count(1, 1, SIP, 10)], 6, |_| true);
    assert_eq!(t.get(&m(1).into()).unwrap().port, 1);
    // A frame captured on port 2 in the same second, then counts on 0 and 1: the counts decide.
    t.account(m(1).into(), cip(1).into(), SIP.into(), 2, 60, 7, |_| true);
    t.account_kernel_counts(&[count(0, 1, SIP, 30), count(1, 1, SIP, 20)], 7, |_| true);
    assert_eq!(t.get(&m(1).into()).unwrap().port, 0);
    check(&t);
}
