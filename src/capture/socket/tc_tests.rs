//! Counting at the tc hooks, live (root only), on a veth in a private network namespace, both
//! ways the programs attach (tcx links, which this host's kernel has, and `cls_bpf` filters,
//! what older kernels have): the socket stops being a tap, ARP comes in both directions through
//! the ring buffer (with its VLAN), an operator's filters keep running and are never touched,
//! a filter left by a crashed rlbd is replaced (or removed, with links), and everything rlbd
//! added goes when it does.

use std::process::Command;
use std::time::Duration;

use super::*;
use crate::capture::frame::tests::arp_frame;
use crate::capture::frame::{parse, Frame};

use super::tests::lab::*;

fn tc(args: &str) -> Result<String, String> {
    let out = Command::new("tc")
        .args(args.split_whitespace())
        .output()
        .map_err(|e| format!("cannot run `tc {args}`: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`tc {args}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A veth pair `cap0`/`peer0` in a namespace of this thread's own, and a socket on `peer0`.
fn veth() -> Result<CaptureSocket, String> {
    veth_pair()?;
    Ok(CaptureSocket::open_by_name("peer0", &[PEER_MAC], &small_ring()).unwrap())
}

/// Counting at `cap0`'s tc hooks through tcx `links` or `cls_bpf` filters.
fn counting_at_tc(links: bool) -> CaptureSocket {
    let mut cap = CaptureSocket::open_by_name("cap0", &[CAP_MAC], &small_ring()).unwrap();
    cap.set_tc_links(links);
    cap.count_in_kernel(&[], 1024).unwrap();
    assert_eq!(
        cap.kernel_hook(),
        Some("tc"),
        "{:?}",
        cap.kernel_hook_fallback()
    );
    let how = if links { "tcx" } else { "cls_bpf" };
    assert_eq!(cap.kernel_tc_attach(), Some(how));
    cap
}

/// `cap0`'s filters at `hook` (tc's listing).
fn filters(hook: &str) -> Result<String, String> {
    tc(&format!("filter show dev cap0 {hook}"))
}

/// Sockets on `ifindex` that are taps for every protocol (this thread's namespace).
fn taps_on(ifindex: u32) -> usize {
    let text = std::fs::read_to_string("/proc/thread-self/net/packet").unwrap();
    text.lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(3) == Some(&"0003") && f.get(4) == Some(&ifindex.to_string().as_str())
        })
        .count()
}

/// An IPv6 frame from the client to the port: ICMPv6 of `icmp_type` (a Neighbor Solicitation
/// with 135), else UDP, to 2001:db8::1.
fn ipv6(icmp_type: Option<u8>) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&CAP_MAC.octets());
    f.extend_from_slice(&CLIENT.octets());
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 32]);
    f.push(if icmp_type.is_some() { 58 } else { 17 });
    f.push(255);
    f.extend_from_slice(
        &"2001:db8::9"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    f.extend_from_slice(&V6_DST.octets());
    let mut body = [0u8; 32];
    body[0] = icmp_type.unwrap_or(0);
    f.extend_from_slice(&body);
    f
}

const V6_DST: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);

fn arp_reply(vlan: bool) -> Vec<u8> {
    arp_frame(
        CAP_MAC, CLIENT, 2, CAP_MAC, SERVER_IP, CLIENT, CLIENT_IP, vlan,
    )
}

fn hooks_and_ring(links: bool) -> Result<(), String> {
    let peer = veth()?;
    let mut cap = counting_at_tc(links);
    assert_eq!(taps_on(cap.ifindex()), 0, "the socket is still a tap");
    for hook in ["ingress", "egress"] {
        let f = filters(hook)?;
        if links {
            // Links are no filters, and need no qdisc.
            assert!(f.trim().is_empty(), "{f}");
        } else {
            assert!(
                f.contains("rlbd_cap0") && f.contains("direct-action"),
                "{f}"
            );
            assert!(f.contains("pref 445"), "{f}");
        }
    }
    if links {
        assert!(!tc("qdisc show dev cap0")?.contains("clsact"));
    }
    // In: an ARP request (tagged, the tag taken out on the way) and data (counted, not
    // handed over). Out: the host's answer, sent by another socket (the kernel's stand-in).
    let req = arp_request(true);
    peer.send(&req).unwrap();
    for _ in 0..50 {
        peer.send(&to_us()).unwrap();
    }
    peer.send(&ipv6(None)).unwrap();
    peer.send(&ipv6(Some(135))).unwrap();
    let host = CaptureSocket::open_by_name("cap0", &[CAP_MAC], &small_ring()).unwrap();
    host.send(&arp_reply(false)).unwrap();
    let got = collect(
        &mut cap,
        3,
        16,
        Duration::from_secs(2),
        Duration::from_millis(200),
    );
    let seen: Vec<(u8, Option<u16>, Option<Frame>)> = got
        .iter()
        .map(|(m, d)| (m.pkt_type, m.vlan, parse(d)))
        .collect();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(
        matches!(
            seen[0],
            (PACKET_BROADCAST, Some(5), Some(Frame::Arp { op: 1, .. }))
        ),
        "{seen:?}"
    );
    // The Neighbor Solicitation, whole (up to the snap length), not counted.
    assert_eq!((seen[1].0, seen[1].1), (PACKET_HOST, None), "{seen:?}");
    assert_eq!(got[1].1, ipv6(Some(135)), "{seen:?}");
    assert!(
        matches!(
            seen[2],
            (PACKET_OUTGOING, None, Some(Frame::Arp { op: 2, .. }))
        ),
        "{seen:?}"
    );
    assert_eq!(got[2].0.orig_len as usize, arp_reply(false).len());
    let mut counts = Vec::new();
    cap.read_counts(&mut counts).unwrap();
    let mut c: Vec<(std::net::IpAddr, u64)> =
        counts.iter().map(|d| (d.key.dst, d.frames)).collect();
    c.sort();
    let want = vec![(SERVER_IP.into(), 50), (V6_DST.into(), 1)];
    assert_eq!(c, want);

    drop(host);
    drop(cap);
    nothing_left()
}

/// What `sock` hands over within 2 s when one frame is expected (and 0.1 s more).
fn one_frame(sock: &mut CaptureSocket) -> Vec<(FrameMeta, Vec<u8>)> {
    collect(
        sock,
        1,
        16,
        Duration::from_secs(2),
        Duration::from_millis(100),
    )
}

/// The mappings of this process's memory that are `sock`'s (its receive ring).
fn ring_mappings(sock: &CaptureSocket) -> usize {
    use std::os::fd::AsRawFd;
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a writable stat buffer and the descriptor is open for the call.
    assert_eq!(unsafe { libc::fstat(sock.as_raw_fd(), &mut st) }, 0);
    let name = format!("socket:[{}]", st.st_ino);
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|l| l.ends_with(&name))
        .count()
}

/// At the tc hooks the receive ring goes back to the kernel, but only after it handed over
/// what it held at the switch: an ARP request captured by the tap a moment before, in a block
/// the retire timer had not handed over yet.
fn ring_given_back() -> Result<(), String> {
    let peer = veth()?;
    let mut cap = CaptureSocket::open_by_name("cap0", &[CAP_MAC], &small_ring()).unwrap();
    assert_eq!(ring_mappings(&cap), 1);
    assert_eq!(cap.ring_bytes(), 4 << 16);
    peer.send(&arp_request(false)).unwrap();
    // In the ring, not handed over yet: its block is still open.
    std::thread::sleep(Duration::from_millis(2));
    cap.count_in_kernel(&[], 1024).unwrap();
    assert_eq!(cap.kernel_hook(), Some("tc"));
    assert!(cap.ring_bytes() > 0, "given back before it was read");
    for _ in 0..20 {
        peer.send(&to_us()).unwrap();
    }
    let got = one_frame(&mut cap);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(matches!(parse(&got[0].1), Some(Frame::Arp { op: 1, .. })));
    let mut counts = Vec::new();
    cap.read_counts(&mut counts).unwrap();
    assert_eq!(cap.ring_bytes(), 0, "the ring was read, and is still kept");
    assert_eq!(ring_mappings(&cap), 0, "the ring is still mapped");
    assert_eq!(counts.iter().map(|d| d.frames).sum::<u64>(), 20);
    // Without it: ARP still arrives (through the programs' ring buffer), data still counts,
    // and the socket still sends and reports its statistics.
    peer.send(&arp_request(true)).unwrap();
    peer.send(&to_us()).unwrap();
    let got = one_frame(&mut cap);
    assert!(
        matches!(got.as_slice(), [(m, d)] if m.vlan == Some(5) && matches!(parse(d), Some(Frame::Arp { op: 1, .. }))),
        "{got:?}"
    );
    cap.read_counts(&mut counts).unwrap();
    assert_eq!(counts.iter().map(|d| d.frames).sum::<u64>(), 1);
    assert!(!cap.pending());
    cap.send(&arp_reply(false)).unwrap();
    cap.stats().unwrap();
    Ok(())
}

/// Nothing of rlbd's at `cap0`'s hooks, nor the qdisc it made.
fn nothing_left() -> Result<(), String> {
    for hook in ["ingress", "egress"] {
        let f = tc(&format!("filter show dev cap0 {hook}"))?;
        assert!(f.trim().is_empty(), "left behind at {hook}: {f}");
    }
    let q = tc("qdisc show dev cap0")?;
    assert!(!q.contains("clsact"), "the qdisc rlbd made is left: {q}");
    Ok(())
}

/// An operator's qdisc and filter at `cap0`'s ingress: a mirror of every frame to `mir0`.
fn operator_mirror() -> Result<(), String> {
    ip("link add mir0 type veth peer name mir1")?;
    ip("link set mir0 up")?;
    ip("link set mir1 up")?;
    tc("qdisc add dev cap0 clsact")?;
    tc("filter add dev cap0 ingress pref 1000 u32 match u32 0 0 action mirred egress mirror dev mir0")?;
    Ok(())
}

/// Whether the operator's mirror still ran for at least `n` frames.
fn operator_mirrored(n: u64) -> Result<(), String> {
    let f = tc("-s filter show dev cap0 ingress")?;
    let mirrored: u64 = f
        .split("Sent ")
        .skip(1)
        .filter_map(|s| s.split_whitespace().nth(2)?.parse::<u64>().ok())
        .sum();
    assert!(mirrored >= n, "the operator's filter no longer runs: {f}");
    Ok(())
}

fn stale_and_foreign() -> Result<(), String> {
    let peer = veth()?;
    // A crashed rlbd leaves its filters (and the qdisc it made) behind.
    std::mem::forget(counting_at_tc(false));
    let cap = counting_at_tc(false);
    drop(cap);
    nothing_left()?;

    // An operator's qdisc and filter (a mirror of every frame to mir0) keep working beside
    // rlbd's and stay when rlbd goes.
    operator_mirror()?;
    let cap = counting_at_tc(false);
    for _ in 0..20 {
        peer.send(&to_us()).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    operator_mirrored(20)?;
    drop(cap);
    let f = tc("filter show dev cap0 ingress")?;
    assert!(f.contains("mirred") && !f.contains("rlbd"), "{f}");
    assert!(tc("qdisc show dev cap0")?.contains("clsact"));

    // A filter of someone else's at rlbd's priority: never touched, the socket counts instead.
    tc("filter add dev cap0 egress pref 445 u32 match u32 0 0 action mirred egress mirror dev mir0")?;
    let mut cap = CaptureSocket::open_by_name("cap0", &[CAP_MAC], &small_ring()).unwrap();
    cap.set_tc_links(false);
    cap.count_in_kernel(&[], 1024).unwrap();
    assert_eq!(cap.kernel_hook(), Some("socket"));
    let why = cap.kernel_hook_fallback().unwrap_or("");
    assert!(why.contains("not rlbd's"), "{why}");
    drop(cap);
    assert!(tc("filter show dev cap0 egress")?.contains("mirred"));
    Ok(())
}

/// Sends `n` IPv4 frames from the client to `cap0` and returns what `cap` counted for them.
fn count_of(peer: &CaptureSocket, cap: &mut CaptureSocket, n: usize) -> u64 {
    for _ in 0..n {
        peer.send(&to_us()).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    let mut counts = Vec::new();
    cap.read_counts(&mut counts).unwrap();
    counts.iter().map(|d| d.frames).sum()
}

/// With tcx links: the filters a crashed rlbd left (counting into an orphaned map) are removed,
/// an operator's qdisc and filters run after rlbd's program and stay, a filter of someone
/// else's at rlbd's priority is no obstacle, and the programs go with the counter.
fn links_beside_filters() -> Result<(), String> {
    let peer = veth()?;
    std::mem::forget(counting_at_tc(false));
    let mut cap = counting_at_tc(true);
    nothing_left()?;
    assert_eq!(count_of(&peer, &mut cap, 30), 30);
    drop(cap);

    operator_mirror()?;
    tc("filter add dev cap0 egress pref 445 u32 match u32 0 0 action mirred egress mirror dev mir0")?;
    let mut cap = counting_at_tc(true);
    assert_eq!(count_of(&peer, &mut cap, 20), 20);
    operator_mirrored(20)?;
    drop(cap);
    assert!(filters("ingress")?.contains("mirred"));
    assert!(filters("egress")?.contains("mirred"));
    assert!(tc("qdisc show dev cap0")?.contains("clsact"));

    // Gone with the counter.
    let cap = counting_at_tc(true);
    let ifindex = cap.ifindex();
    let on = |ingress| crate::capture::ebpf::tcx_programs(ifindex, ingress).unwrap();
    assert_eq!((on(true), on(false)), (1, 1));
    drop(cap);
    assert_eq!(
        (on(true), on(false)),
        (0, 0),
        "programs left at the tcx hooks"
    );
    Ok(())
}

/// Sends `n` IPv4 frames, and returns what `cap` counted for them: (frames, bytes).
fn counts_of(peer: &CaptureSocket, cap: &mut CaptureSocket, n: usize) -> (u64, u64) {
    for _ in 0..n {
        peer.send(&to_us()).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    let mut counts = Vec::new();
    cap.read_counts(&mut counts).unwrap();
    counts
        .iter()
        .fold((0, 0), |(f, b), d| (f + d.frames, b + d.bytes))
}

/// Sampling in the tc program: one data frame in N kept and counted for N (frames and bytes),
/// the count unbiased; every ARP frame still handed over; back to exact at once; a ratio that is
/// no power of two refused, the old one kept.
fn sampled() -> Result<(), String> {
    let peer = veth()?;
    let mut cap = counting_at_tc(true);
    assert!(cap.set_sampling(3).is_err());
    assert!(cap.set_sampling(1 << 17).is_err());
    assert_eq!(cap.sampling(), 1);
    cap.set_sampling(8).unwrap();
    assert_eq!(cap.sampling(), 8);
    // Not a multiple of 8: counted exactly, the frames would not be one.
    const SENT: u64 = 8001;
    let len = to_us().len() as u64;
    let sent_arps = data_with_arp(&peer, &to_us(), SENT);
    let arps = collect(
        &mut cap,
        sent_arps,
        64,
        Duration::from_secs(2),
        Duration::from_millis(200),
    );
    assert_eq!(arps.len(), sent_arps, "ARP is never sampled");
    // What the ratio is chosen from: every packet the ingress hook saw.
    let seen = cap.hook_packets().unwrap();
    assert!(seen >= SENT + sent_arps as u64, "the hook saw {seen}");
    assert_counted_one_in(&mut cap, 8, SENT, len);
    in_step_with_the_ratio(&peer, &mut cap);
    cap.set_sampling(1).unwrap();
    assert_eq!(counts_of(&peer, &mut cap, 50), (50, 50 * len));
    Ok(())
}

/// A sender whose frames come exactly every 8th, at 1 in 8: kept as often as any other frame,
/// not never nor every time as a fixed period in step with it would keep them.
fn in_step_with_the_ratio(peer: &CaptureSocket, cap: &mut CaptureSocket) {
    let second = Mac(2, 0, 0, 0, 0x5e, 8);
    let theirs =
        crate::capture::frame::tests::ipv4_frame(second, CAP_MAC, CLIENT_IP, SERVER_IP, false, 300);
    const ROUNDS: u64 = 1600;
    for _ in 0..ROUNDS {
        peer.send(&theirs).unwrap();
        for _ in 0..7 {
            peer.send(&to_us()).unwrap();
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    let mut counts = Vec::new();
    cap.read_counts(&mut counts).unwrap();
    let of = |mac: Mac| -> u64 {
        let mine = counts.iter().filter(|d| d.key.client.mac == mac);
        mine.map(|d| d.frames).sum()
    };
    // 200 of theirs kept on average, a standard deviation of 13: 105 frames either way.
    let (got, rest) = (of(second), of(CLIENT));
    assert!(
        (ROUNDS * 7 / 10..=ROUNDS * 13 / 10).contains(&got),
        "{got} of {ROUNDS} frames in step with the ratio"
    );
    assert!(
        (ROUNDS * 7 * 85 / 100..=ROUNDS * 7 * 115 / 100).contains(&rest),
        "{rest} of {}",
        ROUNDS * 7
    );
}

/// As the packaged unit's user (no CAP_SYS_ADMIN, no CAP_PERFMON): the programs attach both
/// ways and count, and sample.
fn unprivileged() -> Result<(), String> {
    use crate::capture::ebpf::unprivileged_tests::{drop_effective, CAP_PERFMON, CAP_SYS_ADMIN};
    let peer = veth()?;
    drop_effective(&[CAP_SYS_ADMIN, CAP_PERFMON]).map_err(|e| format!("capset: {e}"))?;
    for links in [true, false] {
        let mut cap = counting_at_tc(links);
        assert_eq!(count_of(&peer, &mut cap, 10), 10, "links: {links}");
        cap.set_sampling(2).unwrap();
        let (frames, _) = counts_of(&peer, &mut cap, 400);
        assert!(
            frames % 2 == 0 && (200..=600).contains(&frames),
            "{frames} of 400"
        );
    }
    Ok(())
}

/// More ARP than the ring buffer holds, sent while nobody reads it: every frame is either handed
/// over or counted lost, and the losses show as the port's ring drops.
fn ring_full() -> Result<(), String> {
    let peer = veth()?;
    let mut cap = counting_at_tc(true);
    const SENT: usize = 6000;
    let req = arp_request(false);
    for _ in 0..SENT {
        peer.send(&req).unwrap();
    }
    let got = collect(
        &mut cap,
        SENT,
        256,
        Duration::from_secs(2),
        Duration::from_millis(200),
    );
    let lost = cap.stats().unwrap().drops;
    assert!(
        lost > 0,
        "the ring buffer never filled ({} handed over)",
        got.len()
    );
    assert_eq!(got.len() as u64 + lost, SENT as u64, "handed over + lost");
    Ok(())
}

use crate::test_support::in_own_thread as run;

#[test]
fn live_tc_hooks_count_and_hand_over_arp() {
    run("live_tc_hooks_count_and_hand_over_arp", || {
        hooks_and_ring(true)
    });
}

#[test]
fn live_tc_filters_count_and_hand_over_arp() {
    run("live_tc_filters_count_and_hand_over_arp", || {
        hooks_and_ring(false)
    });
}

#[test]
fn live_tc_gives_the_capture_ring_back_once_read() {
    run(
        "live_tc_gives_the_capture_ring_back_once_read",
        ring_given_back,
    );
}

/// The capture bench's floor: an empty program at the tcx ingress, gone with its link, and
/// no frame changed by it (data still reaches a tap on the port).
#[test]
fn live_tc_empty_program_holds_the_hook_while_its_link_lives() {
    run(
        "live_tc_empty_program_holds_the_hook_while_its_link_lives",
        || {
            let peer = veth()?;
            let mut tap = CaptureSocket::open_by_name("cap0", &[CAP_MAC], &small_ring()).unwrap();
            let ifindex = tap.ifindex();
            let on = |ingress| crate::capture::ebpf::tcx_programs(ifindex, ingress).unwrap();
            let link = crate::capture::ebpf::tc::empty_program_at_ingress(ifindex).unwrap();
            assert_eq!((on(true), on(false)), (1, 0));
            peer.send(&to_us()).unwrap();
            let got = one_frame(&mut tap);
            assert_eq!(got.len(), 1, "the frame did not get past the empty program");
            drop(link);
            // The kernel releases a closed link's program after a grace period, not within the
            // close: wait for it (a loaded machine took a moment).
            let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
            while on(true) != 0 && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            assert_eq!(on(true), 0, "the program outlived its link by 2 s");
            Ok(())
        },
    );
}

#[test]
fn live_tc_attaches_without_sys_admin_or_perfmon() {
    run(
        "live_tc_attaches_without_sys_admin_or_perfmon",
        unprivileged,
    );
}

#[test]
fn live_tc_links_beside_filters() {
    run("live_tc_links_beside_filters", links_beside_filters);
}

#[test]
fn live_tc_filters_stale_and_foreign() {
    run("live_tc_filters_stale_and_foreign", stale_and_foreign);
}

#[test]
fn live_tc_program_samples_one_data_frame_in_n() {
    run("live_tc_program_samples_one_data_frame_in_n", sampled);
}

#[test]
fn live_tc_ring_full_counts_what_it_lost() {
    run("live_tc_ring_full_counts_what_it_lost", ring_full);
}
