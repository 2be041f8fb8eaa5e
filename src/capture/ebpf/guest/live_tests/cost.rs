//! What the programs cost per frame, measured by the kernel (`BPF_PROG_TEST_RUN`, a million
//! runs each, JIT-compiled): printed for the record, with the verdicts checked.

use super::*;
use crate::capture::ebpf::sys::test_run;

fn cost() -> Result<(), String> {
    netns()?;
    let maps = GuestMaps::new(1024).unwrap();
    for i in 0..200u8 {
        maps.pin(Mac(2, 0x47, 0, 0, 1, i), 0, 7).unwrap();
    }
    maps.pin(GUEST, 0, 7).unwrap();
    let egress = maps.load_egress("bond0").unwrap();
    let ingress = maps.load_ingress("eth1", 7, 0).unwrap();
    let other = maps.load_ingress("eth2", 8, 1).unwrap();
    let mut a = crate::capture::ebpf::insn::Asm::new();
    a.mov_imm(crate::capture::ebpf::insn::Reg::R0, -1).exit();
    let floor = crate::capture::ebpf::sys::prog_load(3, &a.finish()?, "rlbdtest_floor")
        .map_err(|e| e.to_string())?;
    let cases = [
        (
            "the floor: a program that returns at once",
            &floor,
            frame(FAR, STRANGER, None, b"x"),
            -1,
        ),
        (
            "egress, not a guest's",
            &egress,
            frame(FAR, STRANGER, None, b"x"),
            -1,
        ),
        (
            "egress, not a guest's, its MAC ending as a guest's (the lookup)",
            &egress,
            frame(FAR, Mac(2, 0x99, 0, 0, 0, 0x01), None, b"x"),
            -1,
        ),
        (
            "egress, tagged, not a guest's",
            &egress,
            frame(FAR, STRANGER, Some(5), b"x"),
            -1,
        ),
        (
            "egress, a guest's (redirect)",
            &egress,
            frame(FAR, GUEST, None, b"x"),
            7,
        ),
        (
            "ingress, broadcast",
            &ingress,
            frame(BROADCAST, STRANGER, None, b"x"),
            -1,
        ),
        (
            "ingress, another host's",
            &ingress,
            frame(FAR, STRANGER, None, b"x"),
            -1,
        ),
        (
            "ingress, for a guest here",
            &ingress,
            frame(GUEST, STRANGER, None, b"x"),
            -1,
        ),
        (
            "ingress, a flood (drop)",
            &other,
            frame(GUEST, STRANGER, None, b"x"),
            2,
        ),
        (
            "ingress, a reflection (drop)",
            &other,
            frame(BROADCAST, GUEST, None, b"x"),
            2,
        ),
    ];
    for (what, prog, f, want) in cases {
        let (verdict, ns) =
            test_run(prog.as_fd(), &f, 1_000_000).map_err(|e| format!("BPF_PROG_TEST_RUN: {e}"))?;
        assert_eq!(verdict as i32, want, "{what}");
        eprintln!("guest programs: {what}: {ns} ns");
    }
    let c = maps.counters(GUEST, 0).unwrap().unwrap();
    assert_eq!((c.tx_packets, c.rx[0].0), (1_000_000, 1_000_000));
    assert_eq!((c.floods, c.reflections), (1_000_000, 1_000_000));
    Ok(())
}

#[test]
fn what_the_guest_programs_cost() {
    in_own_thread("guest programs' cost", cost);
}
