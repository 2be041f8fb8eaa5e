//! Counting in the kernel, live (root only): the eBPF program on a veth in a private network
//! namespace counts exactly the frames it should, per (client, VLAN, destination), drops them
//! before the ring, and still hands ARP to the ring.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use super::*;
use crate::capture::ebpf::Delta;
use crate::capture::frame::tests::ipv4_frame;
use crate::capture::frame::{parse, Frame};
use crate::client::ClientKey;
use crate::test_support::in_own_thread;

use super::tests::lab::*;

const CLIENT2: Mac = Mac(0x02, 0x52, 0x4c, 0x42, 0x00, 0x0a);
const MACVLAN: Mac = Mac(0x02, 0x52, 0x4c, 0xc2, 0x80, 0x81);
const MACVLAN_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

fn counts(cap: &mut CaptureSocket) -> Vec<(ClientKey, IpAddr, u64, u64, Option<IpAddr>)> {
    let mut out: Vec<Delta> = Vec::new();
    cap.read_counts(&mut out).unwrap();
    let mut v: Vec<_> = out
        .iter()
        .map(|d| (d.key.client, d.key.dst, d.frames, d.bytes, d.src))
        .collect();
    v.sort_by_key(|x| (x.0, x.1));
    v
}

/// `frame` with an 802.1Q tag for `vlan` after the MACs.
fn tagged(frame: &[u8], vlan: u16) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&[0x81, 0x00]);
    f.extend_from_slice(&vlan.to_be_bytes());
    f.extend_from_slice(&frame[12..]);
    f
}

/// A veth pair in a namespace of this thread's own: `cap0` counting in the kernel (in the
/// hash, or in what the kernel prefers), and `peer0` to send from.
fn lab(hash: bool) -> Result<(CaptureSocket, CaptureSocket), String> {
    veth_pair()?;
    // The tests send every frame before they read the ring, and a block retires 10 ms after its
    // first frame however few it holds: on a loaded machine each of the ~100 ARP frames a test
    // sends can end up in a block of its own, and 4 blocks lost 8-54 of 101 ("ARP is never
    // sampled" failed on a ring that was full, not on a sampled ARP). One block per ARP frame
    // sent, and the ring cannot fill whatever the timing.
    let cfg = crate::capture::RingConfig {
        block_count: 128,
        ..small_ring()
    };
    let mut cap = CaptureSocket::open_by_name("cap0", &[CAP_MAC], &cfg).unwrap();
    let peer = CaptureSocket::open_by_name("peer0", &[PEER_MAC], &cfg).unwrap();
    let counting = if hash {
        cap.count_in_kernel_hash(&[MACVLAN], 1024)
    } else {
        cap.count_in_kernel(&[MACVLAN], 1024)
    };
    match counting {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            return Err(format!("no eBPF here: {e}"));
        }
        Err(e) => panic!("eBPF counting refused: {e}"),
    }
    assert!(cap.counts_in_kernel());
    // Every kernel rlbd's labs boot maps arrays (5.5 and later), and has the tc hook.
    let want = if hash { "hash" } else { "slots" };
    assert_eq!(cap.kernel_store(), Some(want));
    let hook = if hash { "socket" } else { "tc" };
    assert_eq!(
        cap.kernel_hook(),
        Some(hook),
        "{:?}",
        cap.kernel_hook_fallback()
    );
    assert_eq!(cap.sampling(), 1);
    // Both programs sample (the tc program: tc_tests.rs; the socket filter: below).
    assert!(cap.set_sampling(4).is_ok());
    assert!(cap.set_sampling(1).is_ok());
    assert_eq!(cap.sampling(), 1);
    // The classic filter's MAC set is kept, not attached.
    cap.set_macs(&[CAP_MAC]).unwrap();
    Ok((cap, peer))
}

fn live(hash: bool) -> Result<(), String> {
    let (mut cap, peer) = lab(hash)?;
    let to_us = to_us();
    let to_us2 = ipv4_frame(CLIENT2, CAP_MAC, OTHER_IP, SERVER_IP, false, 1000);
    let to_macvlan = ipv4_frame(CLIENT, MACVLAN, CLIENT_IP, MACVLAN_IP, false, 200);
    let to_other = ipv4_frame(CLIENT, OTHER, CLIENT_IP, OTHER_IP, false, 300);
    let req = arp_request(false);
    for _ in 0..100 {
        peer.send(&to_us).unwrap();
    }
    for _ in 0..37 {
        peer.send(&to_us2).unwrap();
    }
    for _ in 0..20 {
        peer.send(&to_macvlan).unwrap();
        peer.send(&to_other).unwrap();
        // Our own outgoing frames are not load.
        cap.send(&ipv4_frame(
            CAP_MAC, PEER_MAC, SERVER_IP, CLIENT_IP, false, 300,
        ))
        .unwrap();
    }
    // A tag in the frame: the receive path takes it out (offloaded VLAN) before taps see it.
    for _ in 0..5 {
        peer.send(&tagged(&to_us, 100)).unwrap();
    }
    peer.send(&req).unwrap();

    // Only the ARP request reaches the ring: every data frame was counted and dropped.
    let got = collect(
        &mut cap,
        1,
        usize::MAX,
        Duration::from_secs(2),
        Duration::from_millis(200),
    );
    let kinds: Vec<Option<Frame>> = got.iter().map(|(_, d)| parse(d)).collect();
    assert_eq!(kinds.len(), 1, "{kinds:?}");
    assert!(
        matches!(kinds[0], Some(Frame::Arp { op: 1, .. })),
        "{kinds:?}"
    );

    let c = counts(&mut cap);
    assert_eq!(c, first_reading(&to_us, &to_us2, &to_macvlan));
    deltas_and_program_swap(&mut cap, &peer, &to_us, &to_macvlan);
    Ok(())
}

type Count = (ClientKey, IpAddr, u64, u64, Option<IpAddr>);

/// What the first reading must find, sorted as `counts` sorts.
fn first_reading(to_us: &[u8], to_us2: &[u8], to_macvlan: &[u8]) -> Vec<Count> {
    let client = ClientKey::untagged(CLIENT);
    let want = vec![
        (
            client,
            IpAddr::from(SERVER_IP),
            100,
            100 * to_us.len() as u64,
            Some(IpAddr::from(CLIENT_IP)),
        ),
        (
            client,
            IpAddr::from(MACVLAN_IP),
            20,
            20 * to_macvlan.len() as u64,
            Some(IpAddr::from(CLIENT_IP)),
        ),
        (
            ClientKey::new(CLIENT, 100),
            IpAddr::from(SERVER_IP),
            5,
            // The tag taken out is not in the length (nor in the ring's tp_len).
            5 * to_us.len() as u64,
            Some(IpAddr::from(CLIENT_IP)),
        ),
        (
            ClientKey::untagged(CLIENT2),
            IpAddr::from(SERVER_IP),
            37,
            37 * to_us2.len() as u64,
            Some(IpAddr::from(OTHER_IP)),
        ),
    ];
    let mut want = want;
    want.sort_by_key(|x| (x.0, x.1));
    want
}

/// After a first reading: the next ones count only what was sent since, also across a
/// program swap.
fn deltas_and_program_swap(
    cap: &mut CaptureSocket,
    peer: &CaptureSocket,
    to_us: &[u8],
    to_macvlan: &[u8],
) {
    let client = ClientKey::untagged(CLIENT);
    // Deltas: nothing new, then only what was sent since.
    assert_eq!(counts(cap), vec![]);
    for _ in 0..10 {
        peer.send(to_us).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    let c = counts(cap);
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].0, c[0].2, c[0].3),
        (client, 10, 10 * to_us.len() as u64)
    );

    // A new set of host MACs swaps the program; the counts carry on.
    cap.set_count_macs(&[]).unwrap();
    for _ in 0..3 {
        peer.send(to_macvlan).unwrap();
        peer.send(to_us).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    let c = counts(cap);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].2, 3);
}

/// The socket filter samples as the tc program does: one data frame in N kept and counted for
/// N (frames and bytes), every ARP frame still in the ring, the packets the socket saw counted
/// for choosing N, and back to exact at once.
fn sampled_in_a_socket_filter() -> Result<(), String> {
    let (mut cap, peer) = lab(true)?;
    assert_eq!(cap.kernel_hook(), Some("socket"));
    cap.set_sampling(8).unwrap();
    assert_eq!(cap.sampling(), 8);
    let to_us = to_us();
    // Not a multiple of 8: counted exactly, the frames would not be one.
    const SENT: u64 = 8001;
    let arps_sent = data_with_arp(&peer, &to_us, SENT);
    let got = collect(
        &mut cap,
        arps_sent,
        usize::MAX,
        Duration::from_secs(2),
        Duration::from_millis(200),
    );
    let arps = got
        .iter()
        .filter(|(_, d)| matches!(parse(d), Some(Frame::Arp { .. })));
    assert_eq!(arps.count(), arps_sent, "ARP is never sampled");
    assert_eq!(got.len(), arps_sent, "only ARP reaches the ring");
    let seen = cap.hook_packets().unwrap();
    assert!(
        seen >= SENT + arps_sent as u64,
        "the socket's program saw {seen}"
    );
    assert_counted_one_in(&mut cap, 8, SENT, to_us.len() as u64);
    cap.set_sampling(1).unwrap();
    for _ in 0..50 {
        peer.send(&to_us).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    let c = counts(&mut cap);
    assert_eq!(c.iter().map(|x| x.2).sum::<u64>(), 50);
    Ok(())
}

#[test]
fn live_ebpf_socket_filter_samples() {
    in_own_thread(
        "live_ebpf_socket_filter_samples",
        sampled_in_a_socket_filter,
    );
}

#[test]
fn live_ebpf_counting() {
    for hash in [false, true] {
        in_own_thread("live_ebpf_counting", move || live(hash));
    }
}
