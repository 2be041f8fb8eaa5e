//! The frames a flood sends: each source's made-up MAC and address, and the headers.

use std::net::Ipv4Addr;

use super::{DST_PORT, HEADER_LEN};
use rlbd::capture::Mac;

/// A 32-bit bijection (so distinct inputs stay distinct), scrambled by `key`.
fn mix32(x: u32, key: u64) -> u32 {
    let mut x = x ^ (key as u32);
    x = x.wrapping_mul(0x9e37_79b1);
    x ^= x >> 16;
    x = x.wrapping_mul(0x85eb_ca6b);
    x ^= x >> 13;
    x = x.wrapping_add((key >> 32) as u32);
    x
}

/// Source `s`'s MAC and IPv4 address.
pub fn source(s: u32, seed: Option<u64>) -> (Mac, Ipv4Addr) {
    const FIRST: u32 = u32::from_be_bytes([198, 18, 1, 0]);
    const SPAN: u32 = (1 << 17) - 256;
    let (m, a) = match seed {
        None => (s, s),
        Some(k) => (mix32(s, k), mix32(s, k.rotate_left(17) ^ 0x5bd1_e995)),
    };
    let b = m.to_be_bytes();
    (
        Mac::new(0x02, 0x52, b[0], b[1], b[2], b[3]),
        Ipv4Addr::from(FIRST + a % SPAN),
    )
}

fn ip_checksum(hdr: &[u8]) -> u16 {
    let mut sum: u32 = hdr
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The Ethernet, IPv4 and UDP headers of a frame of `size` bytes (the rest is zero padding).
pub fn header(
    src_mac: Mac,
    dst_mac: Mac,
    src_ip: Ipv4Addr,
    dst_ip: Ipv4Addr,
    size: usize,
) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..6].copy_from_slice(&dst_mac.octets());
    h[6..12].copy_from_slice(&src_mac.octets());
    h[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (size - 14) as u16;
    let ip = &mut h[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[6] = 0x40; // don't fragment
    ip[8] = 64; // TTL
    ip[9] = 17; // UDP
    ip[12..16].copy_from_slice(&src_ip.octets());
    ip[16..20].copy_from_slice(&dst_ip.octets());
    let sum = ip_checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let udp = &mut h[34..42];
    udp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    udp[2..4].copy_from_slice(&DST_PORT.to_be_bytes());
    udp[4..6].copy_from_slice(&(ip_len - 20).to_be_bytes());
    // UDP checksum 0: none (allowed for IPv4).
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlbd::capture::{parse, Frame};

    #[test]
    fn headers_parse_and_check() {
        let (mac, ip) = source(7, None);
        assert_eq!(mac, [0x02, 0x52, 0, 0, 0, 7]);
        assert_eq!(ip, Ipv4Addr::new(198, 18, 1, 7));
        let dst = [0x02, 0, 0, 0, 0, 1];
        let h = header(mac, Mac::from(dst), ip, Ipv4Addr::new(198, 18, 0, 1), 64);
        let mut frame = h.to_vec();
        frame.resize(64, 0);
        assert_eq!(
            parse(&frame),
            Some(Frame::Ipv4 {
                src_mac: mac,
                dst_mac: Mac::from(dst),
                src_ip: ip,
                dst_ip: Ipv4Addr::new(198, 18, 0, 1)
            })
        );
        // A valid header sums to zero, and the lengths describe the frame.
        assert_eq!(ip_checksum(&h[14..34]), 0);
        assert_eq!(u16::from_be_bytes([h[16], h[17]]), 50);
        assert_eq!(u16::from_be_bytes([h[38], h[39]]), 30);
    }

    #[test]
    fn sources_are_distinct_and_in_range() {
        for seed in [None, Some(0x1234_5678_9abc_def0)] {
            let mut macs = std::collections::HashSet::new();
            for s in 0..200_000 {
                let (mac, ip) = source(s, seed);
                assert!(macs.insert(mac), "duplicate MAC for source {s}");
                let o = ip.octets();
                assert_eq!(o[0], 198);
                assert!(o[1] == 19 || (o[1] == 18 && o[2] >= 1), "{ip}");
            }
        }
    }
}
