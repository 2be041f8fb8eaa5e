//! The filter follows the pins: a byte is set while any pinned guest's MAC ends in its two
//! octets (before the pin exists, until after it is gone), and a frame the filter stops is
//! never a pinned guest's.

use super::*;
use crate::capture::ebpf::sys::test_run;

fn follows() -> Result<(), String> {
    netns()?;
    let maps = GuestMaps::new(16).map_err(|e| e.to_string())?;
    // Two guests whose MACs end alike (on two VLANs and two MACs), and one apart.
    let twin = Mac(0x02, 0x48, 0, 0, 0x00, 0x01);
    assert_eq!(filter_index(twin), filter_index(GUEST));
    for m in [GUEST, twin, STRANGER, FAR] {
        assert!(!maps.filter_passes(m), "{m} before any pin");
    }
    maps.pin(GUEST, 0, 7).map_err(|e| e.to_string())?;
    maps.pin(GUEST, 5, 7).map_err(|e| e.to_string())?;
    maps.pin(twin, 0, 7).map_err(|e| e.to_string())?;
    // Pinned again elsewhere: still one guest.
    maps.pin(twin, 0, 8).map_err(|e| e.to_string())?;
    maps.pin(FAR, 0, 8).map_err(|e| e.to_string())?;
    assert!(maps.filter_passes(GUEST) && maps.filter_passes(FAR));
    assert!(!maps.filter_passes(STRANGER));
    let egress = maps.load_egress("bond0").map_err(|e| e.to_string())?;
    let redirected = |m: Mac| -> Result<bool, String> {
        let (verdict, _) = test_run(egress.as_fd(), &frame(BROADCAST, m, None, b"x"), 1)
            .map_err(|e| format!("BPF_PROG_TEST_RUN: {e}"))?;
        Ok(verdict as i32 == super::super::program::TC_ACT_REDIRECT)
    };
    assert!(redirected(GUEST)? && redirected(twin)? && redirected(FAR)?);
    assert!(!redirected(STRANGER)?);
    for (m, vlan) in [(GUEST, 0), (twin, 0)] {
        assert!(maps.unpin(m, vlan).map_err(|e| e.to_string())?);
        assert!(maps.filter_passes(GUEST), "GUEST on VLAN 5 is still pinned");
    }
    assert!(!redirected(twin)?);
    assert!(maps.unpin(GUEST, 5).map_err(|e| e.to_string())?);
    assert!(!maps.filter_passes(GUEST) && !maps.filter_passes(twin));
    assert!(!maps.unpin(GUEST, 5).map_err(|e| e.to_string())?);
    assert!(maps.filter_passes(FAR) && redirected(FAR)?);
    assert!(maps.unpin(FAR, 0).map_err(|e| e.to_string())?);
    assert!(!maps.filter_passes(FAR) && !redirected(FAR)?);
    Ok(())
}

#[test]
fn the_filter_is_set_while_a_guest_is_pinned() {
    in_own_thread("guest filter", follows);
}
