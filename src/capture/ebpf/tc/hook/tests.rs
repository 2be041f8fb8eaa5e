//! What sits at the guest priority, decided without a kernel.

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
fn the_guest_priority_is_free_ours_or_someone_elses() {
    assert_eq!(at_guest_prio(&[]), AtPrio::Free);
    // The counting filter, at its own priority, is not the guests' business (nor the
    // reverse: `classify` ignores the guest priority).
    let counting = filter(PRIO, HANDLE, "bpf", Some("rlbd_eth1"));
    assert_eq!(at_guest_prio(std::slice::from_ref(&counting)), AtPrio::Free);
    let ours = [
        filter(GUEST_PRIO, 0, "bpf", None),
        filter(GUEST_PRIO, GUEST_HANDLE, "bpf", Some("rlbdg_eth1")),
    ];
    assert_eq!(at_guest_prio(&ours), AtPrio::Ours);
    assert_eq!(classify(&[counting, ours[1].clone()]), AtPrio::Ours);
    for theirs in [
        // A counting program's name is not a guest program's.
        filter(GUEST_PRIO, GUEST_HANDLE, "bpf", Some("rlbd_eth1")),
        filter(GUEST_PRIO, 0x800, "u32", None),
        filter(GUEST_PRIO, 1, "bpf", Some("my_prog")),
        filter(GUEST_PRIO, GUEST_HANDLE, "undecodable", None),
    ] {
        let at = at_guest_prio(&[ours[1].clone(), theirs.clone()]);
        assert!(matches!(at, AtPrio::Foreign(_)), "{theirs:?}: {at:?}");
    }
}
