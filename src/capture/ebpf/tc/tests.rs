//! What sits at rlbd's priority, and the kernel's answers, decoded without a kernel.

use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NLMSG_DONE, NLMSG_ERROR};
use netlink_packet_route::tc::{TcAttribute, TcFilterBpfOption, TcHandle, TcMessage, TcOption};

use super::*;

fn filter(prio: u16, handle: u32, kind: &str, name: Option<&str>) -> TcMessage {
    let mut m = TcMessage::with_index(3);
    m.header.info = (u32::from(prio) << 16) | 0x0300;
    m.header.handle = TcHandle::from(handle);
    m.attributes.push(TcAttribute::Kind(kind.into()));
    if let Some(n) = name {
        m.attributes.push(TcAttribute::Options(vec![TcOption::Bpf(
            TcFilterBpfOption::ProgName(n.into()),
        )]));
    }
    m
}

#[test]
fn rlbds_priority_is_free_ours_or_someone_elses() {
    assert_eq!(classify(&[]), AtPrio::Free);
    // Other priorities are none of rlbd's business.
    assert_eq!(classify(&[filter(1, 1, "u32", None)]), AtPrio::Free);
    // The chain's own entry (no handle) and rlbd's program.
    let ours = [
        filter(PRIO, 0, "bpf", None),
        filter(PRIO, HANDLE, "bpf", Some("rlbd_eth1")),
    ];
    assert_eq!(classify(&ours), AtPrio::Ours);
    for theirs in [
        filter(PRIO, 1, "bpf", Some("my_prog")),
        filter(PRIO, 0x800, "u32", None),
        filter(PRIO, HANDLE, "bpf", None),
        filter(PRIO, HANDLE, "undecodable", None),
    ] {
        let at = classify(&[ours[1].clone(), theirs.clone()]);
        assert!(matches!(at, AtPrio::Foreign(_)), "{theirs:?}: {at:?}");
    }
}

fn raw(msg_type: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
    let len = 16 + payload.len();
    let mut b = Vec::new();
    b.extend_from_slice(&(len as u32).to_ne_bytes());
    b.extend_from_slice(&msg_type.to_ne_bytes());
    b.extend_from_slice(&0u16.to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(payload);
    b.resize(len.next_multiple_of(4), 0);
    b
}

#[test]
fn answers_end_with_an_ack_an_error_or_the_dumps_end() {
    let mut out = Vec::new();
    // An acknowledgement (error 0), a refusal, another request's answer.
    assert!(take(&raw(NLMSG_ERROR, 7, &[0; 20]), 7, &mut out).unwrap());
    let e = take(&raw(NLMSG_ERROR, 7, &(-17i32).to_ne_bytes()), 7, &mut out).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EEXIST));
    assert!(!take(&raw(NLMSG_ERROR, 8, &[0; 20]), 7, &mut out).unwrap());
    // A dump: a filter, then its end in a later datagram.
    let f = filter(PRIO, HANDLE, "bpf", Some("rlbd_eth1"));
    let mut header = NetlinkHeader::default();
    header.sequence_number = 9;
    let mut m = NetlinkMessage::new(
        header,
        RouteNetlinkMessage::NewTrafficFilter(f.clone()).into(),
    );
    m.finalize();
    let mut buf = vec![0u8; m.buffer_len()];
    m.serialize(&mut buf);
    assert!(!take(&buf, 9, &mut out).unwrap());
    assert!(take(&raw(NLMSG_DONE, 9, &[0; 4]), 9, &mut out).unwrap());
    assert_eq!(out, vec![f]);
    // Garbage is an error, not a panic.
    assert!(take(&[1, 2, 3], 9, &mut out).is_err());
}
