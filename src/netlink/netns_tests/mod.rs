//! Live tests against the kernel, each inside a private network namespace so that the host's
//! interfaces are never seen nor touched. They need root (CAP_SYS_ADMIN for unshare, and
//! CAP_NET_ADMIN for `ip`); without it they print why and pass.
//!
//! Only 198.18.0.0/15 (benchmarking range) addresses are used.

use std::io;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};

use super::*;

const WAIT: Duration = Duration::from_secs(2);

/// Runs `f` on a fresh thread moved into a new network namespace. Sockets that thread opens
/// and processes it spawns live in that namespace, which disappears with them.
fn in_private_netns(test: &str, f: impl FnOnce() + Send + 'static) {
    if !crate::test_support::root_or_skip(test) {
        return;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        crate::test_support::skip(test, "iproute2 `ip` not found");
        return;
    }
    let test = test.to_owned();
    let handle = std::thread::spawn(move || {
        // SAFETY: affects only this thread's namespace membership.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            let e = io::Error::last_os_error();
            crate::test_support::skip(&test, &format!("unshare(CLONE_NEWNET): {e}"));
            return;
        }
        f();
    });
    if let Err(panic) = handle.join() {
        std::panic::resume_unwind(panic);
    }
}

fn ip(args: &str) {
    let out = Command::new("ip")
        .args(args.split_whitespace())
        .output()
        .expect("running ip");
    assert!(
        out.status.success(),
        "ip {args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A socket registered with its own poller, and everything it has delivered so far.
struct Watcher {
    sock: RouteSocket,
    poll: Poll,
    events: Events,
    seen: Vec<NlEvent>,
}

impl Watcher {
    fn new() -> Self {
        let mut sock = RouteSocket::open().expect("open rtnetlink socket");
        let poll = Poll::new().unwrap();
        poll.registry()
            .register(sock.socket_mut(), Token(0), Interest::READABLE)
            .unwrap();
        Watcher {
            sock,
            poll,
            events: Events::with_capacity(8),
            seen: Vec::new(),
        }
    }

    /// Reads events until one matches `pred` (returned) or `WAIT` passes (panics, naming
    /// `what`). Small batches exercise the resume-within-a-datagram path.
    fn expect(&mut self, what: &str, pred: impl Fn(&NlEvent) -> bool) -> NlEvent {
        match self.wait_for(WAIT, &pred) {
            Some(ev) => ev,
            None => panic!("timed out waiting for {what}; saw {:#?}", self.seen),
        }
    }

    /// Reads events until one matches `pred` (returned, with those before it dropped) or
    /// `within` passes (`None`, everything read kept in `seen`).
    fn wait_for(&mut self, within: Duration, pred: impl Fn(&NlEvent) -> bool) -> Option<NlEvent> {
        let deadline = Instant::now() + within;
        let mut checked = 0;
        loop {
            let more = self.sock.read_batch(3, &mut self.seen).expect("read_batch");
            if let Some(ev) = self.seen[checked..].iter().find(|e| pred(e)) {
                let ev = ev.clone();
                // Later expectations must match later events only.
                let pos = self.seen.iter().rposition(|e| *e == ev).unwrap();
                self.seen.drain(..=pos);
                return Some(ev);
            }
            checked = self.seen.len();
            if more {
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.poll.poll(&mut self.events, Some(left)).unwrap();
        }
    }

    /// Reads whatever arrives within `quiet` and returns it.
    fn drain(&mut self, quiet: Duration) -> Vec<NlEvent> {
        let deadline = Instant::now() + quiet;
        loop {
            while self
                .sock
                .read_batch(64, &mut self.seen)
                .expect("read_batch")
            {}
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return std::mem::take(&mut self.seen);
            }
            self.poll.poll(&mut self.events, Some(left)).unwrap();
        }
    }
}

fn link_named<'a>(ev: &'a NlEvent, name: &str) -> Option<&'a LinkInfo> {
    match ev {
        NlEvent::Link(l) if l.name == name => Some(l),
        _ => None,
    }
}

#[test]
fn snapshot_lists_veth_pair() {
    in_private_netns("snapshot_lists_veth_pair", || {
        ip("link add rlbd-a type veth peer name rlbd-b");
        ip("link set rlbd-a up");
        ip("link set rlbd-b up");
        ip("addr add 198.18.0.1/24 dev rlbd-a");
        ip("neigh add 198.18.0.2 lladdr 02:00:00:00:00:02 dev rlbd-a");
        ip("neigh add 2001:db8::2 lladdr 02:00:00:00:00:06 dev rlbd-a");

        let mut sock = RouteSocket::open().unwrap();
        let snap = sock.snapshot().expect("snapshot");
        let names: Vec<&str> = snap.links.iter().map(|l| l.name.as_str()).collect();
        assert!(names.contains(&"lo"), "{names:?}");
        let a = snap
            .links
            .iter()
            .find(|l| l.name == "rlbd-a")
            .expect("rlbd-a");
        let b = snap
            .links
            .iter()
            .find(|l| l.name == "rlbd-b")
            .expect("rlbd-b");
        for l in [a, b] {
            assert_eq!(l.kind.as_ref().map(|k| k.as_str()), Some("veth"));
            let mac = l.mac.expect("veth has a MAC");
            assert!(!mac.is_zero());
            assert!(l.rx_bytes.is_some() && l.rx_packets.is_some(), "{l:?}");
            assert!(l.admin_up && l.oper_up, "{l:?}");
            assert_eq!(l.master, None);
            assert_eq!(l.bond, None);
        }
        assert_ne!(a.index, b.index);

        let addr = snap
            .addrs
            .iter()
            .find(|x| x.ifindex == a.index && x.network.is_ipv4())
            .expect("IPv4 address on rlbd-a");
        assert_eq!(addr.network, "198.18.0.1/24".parse().unwrap());

        let n = snap
            .neighbours
            .iter()
            .find(|n| n.ip == "198.18.0.2".parse::<std::net::IpAddr>().unwrap())
            .expect("neighbour 198.18.0.2");
        assert_eq!(n.ifindex, a.index);
        assert_eq!(n.mac, Some(Mac(2, 0, 0, 0, 0, 2)));
        assert_eq!(n.state, libc::NUD_PERMANENT);
        assert!(n.is_confirmed());
        // One dump covers both families (IPv6 link-local neighbours may come and go beside).
        let n6 = snap
            .neighbours
            .iter()
            .find(|n| n.ip == "2001:db8::2".parse::<std::net::IpAddr>().unwrap())
            .expect("IPv6 neighbour 2001:db8::2 in the same dump");
        assert_eq!(n6.mac, Some(Mac(2, 0, 0, 0, 0, 6)));

        // Settings that follow the caller's namespace.
        assert!(read_ipv4_conf("rlbd-a", "arp_ignore").is_ok());
        std::fs::write("/proc/sys/net/ipv4/conf/rlbd-a/arp_ignore", "1\n").unwrap();
        assert_eq!(read_ipv4_conf("rlbd-a", "arp_ignore").unwrap(), 1);
    });
}

#[test]
fn events_follow_ip_commands() {
    in_private_netns("events_follow_ip_commands", || {
        let mut w = Watcher::new();
        ip("link add rlbd-a type veth peer name rlbd-b");
        let NlEvent::Link(a) = w.expect("new link rlbd-a", |e| link_named(e, "rlbd-a").is_some())
        else {
            unreachable!()
        };
        assert_eq!(a.kind.as_ref().map(|k| k.as_str()), Some("veth"));
        assert!(!a.admin_up && !a.oper_up);
        let index = a.index;

        ip("link set rlbd-b up");
        ip("link set rlbd-a up");
        w.expect("rlbd-a carrier up", |e| {
            link_named(e, "rlbd-a").is_some_and(|l| l.admin_up && l.oper_up)
        });

        ip("link set rlbd-b down");
        w.expect("rlbd-a carrier lost with its peer down", |e| {
            link_named(e, "rlbd-a").is_some_and(|l| l.admin_up && !l.oper_up)
        });
        ip("link set rlbd-b up");
        w.expect("rlbd-a carrier back", |e| {
            link_named(e, "rlbd-a").is_some_and(|l| l.oper_up)
        });

        ip("addr add 198.18.0.1/24 dev rlbd-a");
        let net: ipnetwork::IpNetwork = "198.18.0.1/24".parse().unwrap();
        w.expect(
            "address added",
            |e| matches!(e, NlEvent::Addr(x) if x.ifindex == index && x.network == net),
        );

        ip("neigh add 198.18.0.2 lladdr 02:00:00:00:00:02 dev rlbd-a");
        let ev = w.expect(
            "neighbour added",
            |e| matches!(e, NlEvent::Neigh(n) if n.ifindex == index),
        );
        let NlEvent::Neigh(n) = ev else {
            unreachable!()
        };
        assert_eq!(n.ip, "198.18.0.2".parse::<std::net::IpAddr>().unwrap());
        assert_eq!(n.mac, Some(Mac(2, 0, 0, 0, 0, 2)));
        assert!(n.is_confirmed(), "{n:?}");

        ip("neigh del 198.18.0.2 dev rlbd-a");
        w.expect(
            "neighbour removed",
            |e| matches!(e, NlEvent::NeighRemoved(n) if n.ifindex == index),
        );
        ip("addr del 198.18.0.1/24 dev rlbd-a");
        w.expect(
            "address removed",
            |e| matches!(e, NlEvent::AddrRemoved(x) if x.network == net),
        );

        ip("link del rlbd-a");
        w.expect("link removed", |e| {
            matches!(e, NlEvent::LinkRemoved { index: i, name } if *i == index && name == "rlbd-a")
        });
    });
}

#[test]
fn bridge_port_removal_is_not_link_removal() {
    in_private_netns("bridge_port_removal_is_not_link_removal", || {
        let mut w = Watcher::new();
        if Command::new("ip")
            .args(["link", "add", "rlbd-br", "type", "bridge"])
            .status()
            .map_or(true, |s| !s.success())
        {
            crate::test_support::skip(
                "bridge_port_removal_is_not_link_removal",
                "no bridge support",
            );
            return;
        }
        ip("link add rlbd-a type veth peer name rlbd-b");
        let NlEvent::Link(br) = w.expect("bridge", |e| link_named(e, "rlbd-br").is_some()) else {
            unreachable!()
        };
        assert_eq!(br.kind.as_ref().map(|k| k.as_str()), Some("bridge"));

        ip("link set rlbd-a master rlbd-br");
        w.expect("rlbd-a enslaved", |e| {
            link_named(e, "rlbd-a").is_some_and(|l| l.master == Some(br.index))
        });
        ip("link set rlbd-a nomaster");
        w.expect("rlbd-a released", |e| {
            link_named(e, "rlbd-a").is_some_and(|l| l.master.is_none())
        });
        // The kernel also sent an AF_BRIDGE RTM_DELLINK for the port; it must not surface.
        let rest = w.drain(Duration::from_millis(200));
        assert!(
            !rest
                .iter()
                .any(|e| matches!(e, NlEvent::LinkRemoved { .. })),
            "{rest:#?}"
        );
    });
}

#[test]
fn back_to_back_dumps_are_serialised() {
    in_private_netns("back_to_back_dumps_are_serialised", || {
        ip("link add rlbd-a type veth peer name rlbd-b");
        ip("addr add 198.18.0.1/24 dev rlbd-a");
        ip("neigh add 198.18.0.2 lladdr 02:00:00:00:00:02 dev rlbd-a");
        let mut w = Watcher::new();
        // The kernel refuses a second dump on a socket while one runs (EBUSY); these must be
        // queued. The repeated request_neighbours coalesces with the one still queued.
        w.sock.request_links().unwrap();
        w.sock.request_neighbours().unwrap();
        w.sock.request_addresses().unwrap();
        w.sock.request_neighbours().unwrap();
        let mut order = Vec::new();
        let mut dones = 0;
        let deadline = Instant::now() + WAIT;
        while dones < 3 {
            let more = w.sock.read_batch(5, &mut w.seen).expect("no dump may fail");
            for ev in w.seen.drain(..) {
                match ev {
                    NlEvent::DumpDone => {
                        dones += 1;
                        order.push("done");
                    }
                    NlEvent::Link(_) => order.push("link"),
                    NlEvent::Neigh(_) => order.push("neigh"),
                    NlEvent::Addr(_) => order.push("addr"),
                    other => panic!("unexpected {other:?}"),
                }
            }
            if !more && dones < 3 {
                let left = deadline.saturating_duration_since(Instant::now());
                assert!(!left.is_zero(), "timed out: {order:?}");
                w.poll.poll(&mut w.events, Some(left)).unwrap();
            }
        }
        order.dedup();
        assert_eq!(
            order,
            ["link", "done", "neigh", "done", "addr", "done"],
            "one dump at a time, in request order"
        );
        assert!(w.drain(Duration::from_millis(200)).is_empty());
    });
}

#[test]
fn single_link_requests_answer_alone_and_beside_a_dump() {
    in_private_netns(
        "single_link_requests_answer_alone_and_beside_a_dump",
        || {
            ip("link add rlbd-a type veth peer name rlbd-b");
            ip("link set rlbd-a up");
            ip("link set rlbd-b up");
            // Many other links: the answer must be the one link asked for, not a dump of them.
            for i in 0..20 {
                ip(&format!("link add rlbd-x{i} type veth peer name rlbd-y{i}"));
            }
            let mut w = Watcher::new();
            let snap = w.sock.snapshot().unwrap();
            let a = snap
                .links
                .iter()
                .find(|l| l.name == "rlbd-a")
                .unwrap()
                .index;
            let b = snap
                .links
                .iter()
                .find(|l| l.name == "rlbd-b")
                .unwrap()
                .index;
            w.drain(Duration::from_millis(100));
            w.sock.request_link(a).unwrap();
            w.sock.request_link(b).unwrap();
            let got = w.drain(Duration::from_millis(300));
            let names: Vec<&str> = got
                .iter()
                .filter_map(|e| match e {
                    NlEvent::Link(l) => Some(l.name.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(names, ["rlbd-a", "rlbd-b"], "{got:#?}");
            assert!(got
                .iter()
                .all(|e| matches!(e, NlEvent::Link(l) if l.rx_packets.is_some())));
            // Beside a running dump: not refused (EBUSY), not queued behind it.
            w.sock.request_links().unwrap();
            w.sock.request_link(a).unwrap();
            let got = w.drain(Duration::from_millis(300));
            let a_seen = got
                .iter()
                .filter(|e| matches!(e, NlEvent::Link(l) if l.index == a))
                .count();
            assert_eq!(a_seen, 2, "once in the dump, once alone");
            assert_eq!(got.iter().filter(|e| **e == NlEvent::DumpDone).count(), 1);
            // A link that does not exist: no event and no error, and the socket goes on.
            w.sock.request_link(999_999).unwrap();
            assert!(w.drain(Duration::from_millis(200)).is_empty());
            w.sock.request_link(b).unwrap();
            w.expect("rlbd-b after an error answer", |e| {
                link_named(e, "rlbd-b").is_some()
            });
        },
    );
}

#[test]
fn snapshot_keeps_earlier_notifications() {
    in_private_netns("snapshot_keeps_earlier_notifications", || {
        let mut w = Watcher::new();
        ip("link add rlbd-a type veth peer name rlbd-b");
        let snap = w.sock.snapshot().unwrap();
        assert!(snap.links.iter().any(|l| l.name == "rlbd-a"));
        // The RTM_NEWLINK notification was queued before the dump replies; the snapshot set
        // it aside instead of dropping it.
        w.expect("notification from before the snapshot", |e| {
            link_named(e, "rlbd-a").is_some()
        });
        assert!(
            !w.drain(Duration::from_millis(100))
                .contains(&NlEvent::DumpDone),
            "the snapshot's own DumpDone events are not handed out again"
        );
    });
}

#[test]
fn overflow_is_reported_as_overrun() {
    in_private_netns("overflow_is_reported_as_overrun", || {
        ip("link add rlbd-a type veth peer name rlbd-b");
        let mut w = Watcher::new();
        // Shrink the buffer (the kernel's floor is about 2 KiB) so that a burst overflows it.
        let small: libc::c_int = 1;
        // SAFETY: valid fd and a live c_int of the given size.
        let rc = unsafe {
            libc::setsockopt(
                w.sock.socket_mut().as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&small as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0);
        let batch: String = (1..=200)
            .map(|i| format!("neigh add 198.18.1.{i} lladdr 02:00:00:00:01:{i:02x} dev rlbd-a\n"))
            .collect();
        let path = std::env::temp_dir().join(format!("rlbd-nl-batch-{}", std::process::id()));
        std::fs::write(&path, batch).unwrap();
        ip(&format!("-batch {}", path.display()));
        let _ = std::fs::remove_file(&path);

        w.expect("overrun", |e| *e == NlEvent::Overrun);
        // Still usable afterwards, and a re-dump recovers everything that was lost.
        let snap = w.sock.snapshot().unwrap();
        let ours = snap
            .neighbours
            .iter()
            .filter(|n| n.is_confirmed() && n.ip.to_string().starts_with("198.18.1."))
            .count();
        assert_eq!(ours, 200);
    });
}

mod bridge_fdb;
