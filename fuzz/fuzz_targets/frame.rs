//! Feeds arbitrary bytes, cut into frames, through `capture::parse` and into a small
//! `ClientTable` (so eviction, expiry and roll-over all run), checking the table's bounds.
//!
//! Input layout: repeated `[len: u8][len bytes of frame]`; a zero length advances the tick and
//! rolls the table over. A short last frame is used as it is.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rlbd::capture::{parse, ClientTable, Frame};

fuzz_target!(|data: &[u8]| {
    let mut table = ClientTable::new(8, 2);
    let mut tick = 0u64;
    let mut rest = data;
    let mut port = 0u16;
    while let Some((&len, tail)) = rest.split_first() {
        if len == 0 {
            tick += 1;
            table.roll_over(tick);
            rest = tail;
            continue;
        }
        let n = usize::from(len).min(tail.len());
        let (frame, tail) = tail.split_at(n);
        rest = tail;
        port = port.wrapping_add(1) % 4;
        // The wire length may exceed the captured bytes (snap length), and on a sampled port a
        // kept frame stands for up to MAX_SAMPLING frames.
        let wire_len = u64::from(len) * 6 * (1u64 << (len % 17));
        match parse(frame) {
            Some(Frame::Ipv4 {
                src_mac,
                src_ip,
                dst_ip,
                ..
            }) => table.account(src_mac.into(), src_ip.into(), dst_ip.into(), port, wire_len, tick, |_| true),
            Some(Frame::Arp { sha, spa, tpa, .. }) => {
                table.account(sha.into(), spa.into(), tpa.into(), port, wire_len, tick, |_| true)
            }
            Some(Frame::Ipv6 {
                src_mac,
                src_ip,
                dst_ip,
                ..
            }) => table.account(src_mac.into(), src_ip.into(), dst_ip.into(), port, wire_len, tick, |_| true),
            Some(Frame::Nd { lladdr, .. }) => {
                let _ = lladdr;
            }
            None => {}
        }
        assert!(table.len() <= table.capacity());
        assert_eq!(table.iter().count(), table.len());
    }
    table.roll_over(tick + 1);
    for e in table.iter() {
        assert_eq!(table.get(&e.key), Some(e));
        assert_eq!(e.bytes_this_second, 0);
    }
});
