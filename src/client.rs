//! Who a client is, and what it talks to. One host can sit on two VLANs with one MAC: a client
//! is its MAC on one VLAN, and it may talk to several of the server's addresses at once (NFS on
//! one, iSCSI on another, IPv4 and IPv6).

use std::fmt;
use std::net::IpAddr;

use crate::Mac;

/// A client: a MAC on a VLAN (0: untagged).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ClientKey {
    pub mac: Mac,
    pub vlan: u16,
}

impl ClientKey {
    pub const fn new(mac: Mac, vlan: u16) -> Self {
        ClientKey { mac, vlan }
    }

    /// An untagged client.
    pub const fn untagged(mac: Mac) -> Self {
        ClientKey { mac, vlan: 0 }
    }

    /// The key as one integer (the MAC's 48 bits, the VLAN above them): compared in one
    /// instruction on the capture path.
    #[inline]
    pub fn as_u64(&self) -> u64 {
        let o = self.mac.octets();
        u64::from_le_bytes([o[0], o[1], o[2], o[3], o[4], o[5], 0, 0])
            | (u64::from(self.vlan) << 48)
    }
}

impl From<Mac> for ClientKey {
    fn from(mac: Mac) -> Self {
        ClientKey::untagged(mac)
    }
}

impl fmt::Display for ClientKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.vlan == 0 {
            write!(f, "{}", self.mac)
        } else {
            write!(f, "{} vlan {}", self.mac, self.vlan)
        }
    }
}

/// The server addresses a client was seen sending to, at most [`ServerSet::MAX`] of them (more
/// are noted as an overflow: a client that uses more cannot be moved whole). An address unused
/// for as long as the client table's idle timeout makes room for a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerSet {
    addrs: [IpAddr; ServerSet::MAX],
    /// The tick each address was last seen.
    seen: [u32; ServerSet::MAX],
    len: u8,
    /// The last one noted, checked first: a client's frames mostly go to one address in a row.
    last: u8,
    overflow: bool,
    /// The latest destination that was not the server's: traffic routed through it (or sent to
    /// an address on an interface rlbd does not watch).
    other: Option<IpAddr>,
}

impl Default for ServerSet {
    fn default() -> Self {
        ServerSet {
            addrs: [IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED); ServerSet::MAX],
            seen: [0; ServerSet::MAX],
            len: 0,
            last: 0,
            overflow: false,
            other: None,
        }
    }
}

impl ServerSet {
    /// Addresses tracked per client: the bound on the addresses one move claims.
    pub const MAX: usize = 4;

    /// True when `ip` is the destination noted last (the common case, checked before anything
    /// else on the capture path).
    #[inline]
    pub fn is_last(&self, ip: IpAddr) -> bool {
        (self.len > 0 && self.addrs[usize::from(self.last)] == ip) || self.other == Some(ip)
    }

    /// Notes one of the server's addresses as a destination at `tick`. When the set is full, an
    /// address unseen for more than `stale_ticks` (0: never stale) gives way; otherwise the
    /// client overflows.
    #[inline]
    pub fn note(&mut self, ip: IpAddr, tick: u64, stale_ticks: u64) {
        let t = tick as u32;
        let len = usize::from(self.len);
        if len > 0 && self.addrs[usize::from(self.last)] == ip {
            self.seen[usize::from(self.last)] = t;
            return;
        }
        let slot = if let Some(i) = self.addrs[..len].iter().position(|a| *a == ip) {
            i
        } else if len < Self::MAX {
            self.len += 1;
            len
        } else {
            let (i, oldest) = (0..len)
                .map(|i| (i, self.seen[i]))
                .min_by_key(|x| x.1)
                .unwrap_or((0, t));
            if stale_ticks == 0 || u64::from(t.wrapping_sub(oldest)) <= stale_ticks {
                self.overflow = true;
                return;
            }
            i
        };
        self.addrs[slot] = ip;
        self.seen[slot] = t;
        self.last = slot as u8;
    }

    /// Notes a destination that is not one of the server's addresses.
    #[inline]
    pub fn note_other(&mut self, ip: IpAddr) {
        self.other = Some(ip);
    }

    /// The latest destination that was not the server's, if any.
    pub fn other(&self) -> Option<IpAddr> {
        self.other
    }

    pub fn iter(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.addrs[..usize::from(self.len)].iter().copied()
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when the client sent to more of the server's addresses than the set holds, all of
    /// them recently.
    pub fn overflowed(&self) -> bool {
        self.overflow
    }

    /// The most recent destination among the server's addresses, if any.
    pub fn last(&self) -> Option<IpAddr> {
        (self.len > 0).then(|| self.addrs[usize::from(self.last)])
    }
}

/// `m` as `aa:bb:cc:dd:ee:ff`, the same text as its `Display`, without the formatting
/// machinery: the state file and the status write one per client.
pub fn mac_text(m: crate::Mac) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(17);
    for (i, b) in m.octets().into_iter().enumerate() {
        if i > 0 {
            s.push(':');
        }
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 15)]));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn a_server_set_holds_distinct_addresses_and_notes_overflow() {
        let mut s = ServerSet::default();
        let ip = |n: u8| IpAddr::V4(Ipv4Addr::new(198, 18, 0, n));
        for (t, n) in [1, 1, 2, 1, 3, 4].into_iter().enumerate() {
            s.note(ip(n), t as u64, 60);
        }
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            vec![ip(1), ip(2), ip(3), ip(4)]
        );
        assert_eq!(s.last(), Some(ip(4)));
        assert!(s.is_last(ip(4)) && !s.is_last(ip(1)));
        assert!(!s.overflowed());
        s.note(ip(2), 10, 60);
        assert_eq!(s.last(), Some(ip(2)));
        s.note(ip(5), 11, 60);
        assert!(s.overflowed(), "all four seen within the minute");
        assert_eq!(s.iter().count(), ServerSet::MAX);
    }

    #[test]
    fn a_stale_address_gives_way() {
        let mut s = ServerSet::default();
        let ip = |n: u8| IpAddr::V4(Ipv4Addr::new(198, 18, 0, n));
        for n in 1..=4 {
            s.note(ip(n), 100 + u64::from(n), 60);
        }
        s.note(ip(1), 170, 60);
        s.note(ip(5), 170, 60);
        assert!(!s.overflowed());
        // .2, seen at 102, made room; .1 was seen again and stays.
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            vec![ip(1), ip(5), ip(3), ip(4)]
        );
        s.note_other(ip(9));
        assert_eq!(s.other(), Some(ip(9)));
        assert!(s.is_last(ip(9)));
    }

    #[test]
    fn keys_differ_by_vlan() {
        let m = Mac(2, 0, 0, 0, 0, 1);
        assert_ne!(
            ClientKey::new(m, 100).as_u64(),
            ClientKey::new(m, 200).as_u64()
        );
        assert_eq!(
            ClientKey::new(m, 100).to_string(),
            "02:00:00:00:00:01 vlan 100"
        );
        assert_eq!(ClientKey::untagged(m).to_string(), "02:00:00:00:00:01");
    }

    #[test]
    fn mac_text_is_the_display() {
        for m in [
            crate::Mac(0, 0, 0, 0, 0, 0),
            crate::Mac(0x02, 0xaa, 0x0b, 0xc0, 0xff, 0x1e),
            crate::Mac(0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
        ] {
            assert_eq!(super::mac_text(m), m.to_string());
        }
    }
}
