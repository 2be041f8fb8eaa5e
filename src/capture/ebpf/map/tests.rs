use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;

fn key(mac_last: u8, vlan: u16, dst: IpAddr) -> EntryKey {
    EntryKey {
        client: ClientKey::new(Mac::from([2, 0, 0, 0, 0, mac_last]), vlan),
        dst,
    }
}

fn value(frames: u64, bytes: u64, src: [u8; 16]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&frames.to_ne_bytes());
    v.extend_from_slice(&bytes.to_ne_bytes());
    v.extend_from_slice(&src);
    v
}

const V4: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const V6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));

#[test]
fn keys_round_trip_and_ipv4_is_v4_mapped() {
    for k in [key(1, 0, V4), key(2, 100, V6), key(3, 4095, V4)] {
        assert_eq!(decode_key(&encode_key(&k)), k);
    }
    let raw = encode_key(&key(9, 7, V4));
    assert_eq!(&raw[..6], &[2, 0, 0, 0, 0, 9]);
    assert_eq!(u16::from_ne_bytes([raw[6], raw[7]]), 7);
    assert_eq!(&raw[8..20], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
    assert_eq!(&raw[20..], &[198, 18, 0, 1]);
}

#[test]
fn values_sum_over_cpus_and_take_a_known_source() {
    let src4 = Ipv4Addr::new(198, 18, 0, 9).to_ipv6_mapped().octets();
    let mut v = value(3, 300, [0; 16]);
    v.extend(value(4, 400, src4));
    v.extend(value(0, 0, [0; 16]));
    let t = sum_values(&v);
    assert_eq!((t.frames, t.bytes), (7, 700));
    assert_eq!(t.src, Some(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 9))));
    // No source: all zero, or ::ffff:0.0.0.0.
    let t = sum_values(&value(
        1,
        60,
        Ipv4Addr::UNSPECIFIED.to_ipv6_mapped().octets(),
    ));
    assert_eq!(t.src, None);
    // Odd answers: a short trailing record is ignored, huge counters saturate.
    let mut v = value(u64::MAX, u64::MAX, [0; 16]);
    v.extend(value(5, 5, [0; 16]));
    v.extend_from_slice(&[1, 2, 3]);
    let t = sum_values(&v);
    assert_eq!((t.frames, t.bytes), (u64::MAX, u64::MAX));
    assert_eq!(sum_values(&[]), Totals::default());
}

fn totals(frames: u64, bytes: u64) -> Totals {
    Totals {
        frames,
        bytes,
        src: None,
    }
}

#[test]
fn deltas_follow_cumulative_counters() {
    let mut d = Deltas::new();
    let a = encode_key(&key(1, 0, V4));
    let b = encode_key(&key(2, 0, V6));
    // First reading: everything is new.
    let got = d.entry(&a, totals(10, 1000)).unwrap();
    assert_eq!((got.frames, got.bytes), (10, 1000));
    assert_eq!(got.key, key(1, 0, V4));
    d.finish();
    // Growth is the delta; no growth reports nothing.
    let got = d.entry(&a, totals(15, 1600)).unwrap();
    assert_eq!((got.frames, got.bytes), (5, 600));
    assert_eq!(d.entry(&b, totals(1, 60)).map(|x| x.frames), Some(1));
    d.finish();
    assert_eq!(d.entry(&a, totals(15, 1600)), None);
    assert_eq!(d.entry(&b, totals(3, 180)).map(|x| x.frames), Some(2));
    d.finish();
    assert_eq!(d.len(), 2);
}

#[test]
fn an_evicted_entry_that_returns_starts_from_zero() {
    let mut d = Deltas::new();
    let a = encode_key(&key(1, 0, V4));
    d.entry(&a, totals(100, 10_000));
    d.finish();
    // Evicted and created again: lower than before, all of it is new.
    let got = d.entry(&a, totals(4, 400)).unwrap();
    assert_eq!((got.frames, got.bytes), (4, 400));
    d.finish();
    // Missing from a reading: forgotten, so when it returns it counts from zero.
    d.finish();
    assert!(d.is_empty());
    let got = d.entry(&a, totals(9, 900)).unwrap();
    assert_eq!((got.frames, got.bytes), (9, 900));
}

#[test]
fn a_key_seen_twice_in_one_reading_counts_once() {
    let mut d = Deltas::new();
    let a = encode_key(&key(1, 0, V4));
    assert!(d.entry(&a, totals(5, 500)).is_some());
    assert_eq!(d.entry(&a, totals(6, 600)), None);
    d.finish();
    assert_eq!(d.entry(&a, totals(6, 600)).map(|x| x.frames), Some(1));
}

#[test]
fn a_reading_that_failed_halfway_neither_loses_nor_doubles() {
    let mut d = Deltas::new();
    let a = encode_key(&key(1, 0, V4));
    let b = encode_key(&key(2, 0, V4));
    d.entry(&a, totals(5, 500));
    d.entry(&b, totals(5, 500));
    d.finish();
    // Reached `a`, failed before `b`.
    assert_eq!(d.entry(&a, totals(8, 800)).map(|x| x.frames), Some(3));
    d.finish_partial();
    assert_eq!(d.len(), 2);
    assert_eq!(d.entry(&a, totals(9, 900)).map(|x| x.frames), Some(1));
    assert_eq!(d.entry(&b, totals(7, 700)).map(|x| x.frames), Some(2));
}

#[test]
fn possible_cpu_lists() {
    assert_eq!(possible_cpus("0-1\n"), Some(2));
    assert_eq!(possible_cpus("0"), Some(1));
    assert_eq!(possible_cpus("0,2-5,8"), Some(6));
    assert_eq!(possible_cpus(""), None);
    assert_eq!(possible_cpus("3-1"), None);
    assert_eq!(possible_cpus("x"), None);
    assert_eq!(possible_cpus("0-99999999"), None);
}

#[test]
fn map_size_follows_the_table_within_bounds() {
    use super::super::{map_entries, MAX_ENTRIES, MIN_ENTRIES};
    assert_eq!(map_entries(16) as usize, MIN_ENTRIES);
    assert_eq!(map_entries(4096) as usize, MIN_ENTRIES);
    assert_eq!(map_entries(20_000), 40_000);
    assert_eq!(map_entries(65_536) as usize, MAX_ENTRIES);
    assert_eq!(map_entries(usize::MAX) as usize, MAX_ENTRIES);
}
