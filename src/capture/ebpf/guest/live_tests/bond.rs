//! The guests' programs on a real balance-alb bond, which this host's kernel lacks: ignored in
//! the host's run, run in a QEMU guest of a Debian kernel with the bonding driver loaded
//! (`max_bonds=0`), e.g. `<test binary> guest::live_tests::bond --ignored --test-threads=1`.
//! The bond bond0 (slaves s0, active, and s1; the switch's side p0, p1) is a port of the host
//! bridge br0, whose other port vm is the guest's (vmpeer).

use super::*;

fn real_bond() -> Result<(), String> {
    netns()?;
    run("ip", "link add bond0 type bond mode balance-alb miimon 100")
        .map_err(|e| format!("no bonding driver: {e}"))?;
    for (s, p) in [("s0", "p0"), ("s1", "p1")] {
        ip(&format!("link add {s} type veth peer name {p}"));
        ip(&format!("link set {s} master bond0"));
        ip(&format!("link set {p} up"));
    }
    ip("link set bond0 up");
    ip("link add br0 type bridge forward_delay 0");
    ip("link set br0 up");
    ip("link set bond0 master br0");
    veth("vm", "vmpeer");
    ip("link set vm master br0");
    std::thread::sleep(Duration::from_secs(1));
    let bonding = std::fs::read_to_string("/proc/thread-self/net/bonding/bond0")
        .map_err(|e| format!("bond0's state: {e}"))?;
    assert!(bonding.contains("Currently Active Slave: s0"), "{bonding}");
    let (s0, s1) = (ifindex("s0"), ifindex("s1"));
    let maps = GuestMaps::new(16).unwrap();
    let egress = maps.load_egress("bond0").unwrap();
    let mut hooks = vec![HookAttached::attach(
        "bond0",
        ifindex("bond0"),
        Direction::Egress,
        egress.as_fd(),
        &prog_name("bond0"),
        true,
    )
    .unwrap()];
    for (dev, i, slot) in [("s0", s0, 0), ("s1", s1, 1)] {
        let prog = maps.load_ingress(dev, i, slot).unwrap();
        let name = prog_name(dev);
        hooks.push(
            HookAttached::attach(dev, i, Direction::Ingress, prog.as_fd(), &name, true).unwrap(),
        );
    }
    maps.pin(GUEST, 0, s1).unwrap();
    let (p0, p1, vmp) = (Sock::open("p0"), Sock::open("p1"), Sock::open("vmpeer"));
    transmit(&maps, &p0, &p1, &vmp);
    receive(&maps, &p0, &p1, &vmp);
    drop(hooks);
    Ok(())
}

/// The guest's frames leave through s1, the inactive slave, as sent (the driver would put a
/// slave's MAC on them); everyone else's take the driver's path.
fn transmit(maps: &GuestMaps, p0: &Sock, p1: &Sock, vmp: &Sock) {
    let sent = [
        (frame(FAR, GUEST, None, b"g-uni"), 3),
        (frame(BROADCAST, GUEST, None, b"g-bc"), 1),
        (frame(FAR, STRANGER, None, b"s-uni"), 2),
    ];
    for (f, n) in &sent {
        for _ in 0..*n {
            vmp.send(f);
        }
    }
    let (at0, at1) = (p0.drain(WAIT), p1.drain(WAIT));
    assert_eq!(with(&at1, b"g-uni"), vec![sent[0].0.clone(); 3]);
    assert_eq!(with(&at1, b"g-bc"), vec![sent[1].0.clone()]);
    assert!(with(&at0, b"g-uni").is_empty() && with(&at0, b"g-bc").is_empty());
    let strangers = with(&at0, b"s-uni").len() + with(&at1, b"s-uni").len();
    assert_eq!(strangers, 2);
    let c = maps.counters(GUEST, 0).unwrap().unwrap();
    assert_eq!(c.tx_packets, 4);
}

/// From the switch: reflections and floods on s0 dropped, the guest's frames on s1 delivered,
/// its own broadcast on s1 (it moved) counted before the driver drops it (s1 is inactive).
fn receive(maps: &GuestMaps, p0: &Sock, p1: &Sock, vmp: &Sock) {
    let sent = [
        (p0, frame(BROADCAST, GUEST, None, b"refl"), 2),
        (p0, frame(GUEST, STRANGER, None, b"flood"), 2),
        (p1, frame(GUEST, STRANGER, None, b"rx-b"), 3),
        (p1, frame(BROADCAST, GUEST, None, b"moved"), 1),
    ];
    for (s, f, n) in &sent {
        for _ in 0..*n {
            s.send(f);
        }
    }
    let at_vm = vmp.drain(WAIT);
    for (m, want) in [
        (&b"refl"[..], 0),
        (b"flood", 0),
        (b"rx-b", 3),
        (b"moved", 0),
    ] {
        let got = with(&at_vm, m).len();
        assert_eq!(got, want, "{}", String::from_utf8_lossy(m));
    }
    let c = maps.counters(GUEST, 0).unwrap().unwrap();
    assert_eq!((c.reflections, c.floods, c.seen_from_switch), (2, 2, 1));
    assert_eq!(c.rx[1], (3, 3 * sent[2].1.len() as u64));
    assert_eq!(c.rx[0], (0, 0));
    assert_eq!(learned_on(GUEST).as_deref(), Some("vm"));
}

#[test]
#[ignore = "needs the bonding driver: run in a QEMU guest of the kernel lab"]
fn on_a_real_alb_bond_guests_are_pinned_and_reflections_dropped() {
    in_own_thread("guests on a real bond", real_bond);
}
