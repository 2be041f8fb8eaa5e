//! The clients: each a MAC and an IPv4 address on the server's subnet (every third one IPv6
//! only), an elastic demand, and a Linux-like neighbour cache entry for the server's address
//! (REACHABLE -> STALE -> DELAY -> PROBE -> FAILED; for ARP, locktime honoured except for the
//! gratuitous form; for ND, the Override and Solicited flags as ndisc_recv_na reads them). Its
//! traffic goes to the MAC in that entry, so the port it lands on follows the frames it accepts.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::Mac;

/// The server's address (on p0, /24).
pub const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The server's second IPv4 address on the same subnet (a service address), used by every
/// fourth client.
pub const SERVER_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// Linux's defaults, roughly: base_reachable_time 30 s, delay_first_probe 5 s, locktime 1 s,
/// three unicast probes a second apart.
pub const REACHABLE_MS: u64 = 30_000;
pub const DELAY_MS: u64 = 5_000;
pub const LOCKTIME_MS: u64 = 1_000;
pub const UCAST_PROBES: u32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Reachable,
    Stale,
    Delay,
    Probe,
}

#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub mac: Mac,
    pub state: State,
    /// When the state last changed (or the entry was last confirmed).
    pub since: u64,
    /// When the link-layer address last changed (locktime).
    pub updated: u64,
    pub probes: u32,
}

#[derive(Debug, Clone)]
pub struct Client {
    pub mac: Mac,
    pub ip: Ipv4Addr,
    /// The server's IPv4 address it talks to (its entry is for that one).
    pub server: Ipv4Addr,
    /// Its VLAN (100 on bond0.100), 0 untagged.
    pub vlan: u16,
    /// An IPv6-only client: its address, and its entry is for the server's IPv6 address.
    pub ip6: Option<Ipv6Addr>,
    /// An IPv6 client that also sends a trickle of IPv4 the server never answers.
    pub dual: bool,
    pub present: bool,
    /// Bits per second it would send with room.
    pub demand_bps: f64,
    /// What it got last second.
    pub delivered_bps: f64,
    pub entry: Option<Entry>,
    /// When its demand next changes, and when it leaves.
    pub next_change: u64,
    pub leaves_at: u64,
}

/// What a client does about its entry this second.
#[derive(Debug, PartialEq, Eq)]
pub enum Ask {
    None,
    /// A broadcast request for the server's address.
    Broadcast,
    /// A unicast probe to the MAC it has.
    Unicast(Mac),
}

impl Client {
    /// The MAC it sends to, if it has one.
    pub fn target(&self) -> Option<Mac> {
        self.entry.map(|e| e.mac)
    }

    /// One second of the entry's timers; `confirmed`: its TCP made progress (an upper-layer
    /// confirmation).
    pub fn tick(&mut self, now: u64, confirmed: bool) -> Ask {
        if !self.present {
            return Ask::None;
        }
        let sending = self.demand_bps > 0.0;
        let Some(e) = self.entry.as_mut() else {
            return if sending { Ask::Broadcast } else { Ask::None };
        };
        if confirmed {
            e.state = State::Reachable;
            e.since = now;
            e.probes = 0;
            return Ask::None;
        }
        match e.state {
            State::Reachable if now >= e.since + REACHABLE_MS => {
                e.state = State::Stale;
                e.since = now;
            }
            State::Stale if sending => {
                e.state = State::Delay;
                e.since = now;
            }
            State::Delay if now >= e.since + DELAY_MS => {
                e.state = State::Probe;
                e.since = now;
                e.probes = 1;
                return Ask::Unicast(e.mac);
            }
            State::Probe if e.probes < UCAST_PROBES => {
                e.probes += 1;
                return Ask::Unicast(e.mac);
            }
            State::Probe => {
                self.entry = None;
                return if sending { Ask::Broadcast } else { Ask::None };
            }
            _ => {}
        }
        Ask::None
    }

    /// A Neighbor Advertisement of the server's address reached this client (ndisc_recv_na and
    /// neigh_update): with no entry only a solicited one makes it; a new MAC is taken only with
    /// Override, and without it a REACHABLE entry turns STALE. True when the entry changed MAC.
    pub fn hear_na(&mut self, now: u64, tll: Mac, solicited: bool, override_: bool) -> bool {
        let state = if solicited {
            State::Reachable
        } else {
            State::Stale
        };
        let fresh = Entry {
            mac: tll,
            state,
            since: now,
            updated: now,
            probes: 0,
        };
        match self.entry.as_mut() {
            None if solicited => {
                self.entry = Some(fresh);
                true
            }
            None => false,
            Some(e) if e.mac == tll => {
                if solicited {
                    e.state = State::Reachable;
                    e.since = now;
                    e.probes = 0;
                }
                false
            }
            Some(e) if override_ => {
                *e = fresh;
                true
            }
            Some(e) => {
                if e.state == State::Reachable {
                    e.state = State::Stale;
                    e.since = now;
                }
                false
            }
        }
    }

    /// An ARP frame for the server's address reached this client: `reply` (op 2) or a request
    /// naming it as the target; `garp`: sender IP = target IP. True when the entry changed MAC.
    pub fn hear(&mut self, now: u64, sha: Mac, reply: bool, unicast: bool, garp: bool) -> bool {
        let state = if reply && unicast {
            State::Reachable
        } else {
            State::Stale
        };
        match self.entry.as_mut() {
            None => {
                if reply {
                    self.entry = Some(Entry {
                        mac: sha,
                        state,
                        since: now,
                        updated: now,
                        probes: 0,
                    });
                    return true;
                }
                false
            }
            Some(e) if e.mac == sha => {
                if reply {
                    e.state = state;
                    e.since = now;
                    e.probes = 0;
                }
                false
            }
            Some(e) => {
                // arp_process: a request overrides (neigh_event_ns); a reply only after locktime
                // or in the gratuitous form.
                let over = !reply || garp || now >= e.updated + LOCKTIME_MS;
                if over {
                    *e = Entry {
                        mac: sha,
                        state,
                        since: now,
                        updated: now,
                        probes: 0,
                    };
                }
                over
            }
        }
    }
}

/// An Ethernet/IPv4 ARP frame (untagged, padded to 60 bytes).
pub fn arp_frame(
    eth_dst: Mac,
    op: u16,
    sha: Mac,
    spa: Ipv4Addr,
    tha: Mac,
    tpa: Ipv4Addr,
) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&eth_dst.octets());
    f.extend_from_slice(&sha.octets());
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4]);
    f.extend_from_slice(&op.to_be_bytes());
    f.extend_from_slice(&sha.octets());
    f.extend_from_slice(&spa.octets());
    f.extend_from_slice(&tha.octets());
    f.extend_from_slice(&tpa.octets());
    f.resize(60, 0);
    f
}

pub const BROADCAST: Mac = Mac(0xff, 0xff, 0xff, 0xff, 0xff, 0xff);

/// The most clients a world holds (the seeds' populations go up to it).
pub const MAX_POPULATION: usize = 300;

/// Slot `slot`'s IPv4 address: untagged ones 198.18.0.(10 + slot) while that fits (slots 0, 1
/// and 3 are the ones `[clients]` excludes); past it, on a bond, the numbers the tagged slots
/// left free, and on plain ports (a /23) 198.18.1.x; tagged ones 198.18.1.(10 + slot / 5).
pub fn client_ip(slot: usize, tagged: bool, bonded: bool) -> Ipv4Addr {
    const FITS: usize = 245;
    let host = |n: usize| u8::try_from(n).expect("a host number under 255");
    if tagged {
        return Ipv4Addr::new(198, 18, 1, host(10 + slot / 5));
    }
    if slot < FITS {
        return Ipv4Addr::new(198, 18, 0, host(10 + slot));
    }
    if bonded {
        let k = (FITS..slot).filter(|s| s % 5 != 3).count();
        return Ipv4Addr::new(198, 18, 0, host(10 + 3 + 5 * k));
    }
    Ipv4Addr::new(198, 18, 1, host(10 + slot - FITS))
}
