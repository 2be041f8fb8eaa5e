//! The guests' programs live (root only), in a network namespace of the test thread's own
//! (gone with the thread, whatever happens), both ways they attach (tcx links, which this
//! host's kernel has, and `cls_bpf` filters): veth pairs stand in for the bond and its slaves
//! (this kernel has no bonding driver), a bridge for the host's.

use std::os::fd::{AsFd, OwnedFd};
use std::process::Command;
use std::time::Duration;

use super::*;
use crate::capture::ebpf::tc::hook::{Direction, HookAttached, GUEST_PRIO};
use crate::capture::ebpf::{Hook, KernelCounter};
use crate::test_support::in_own_thread;

mod bond;
mod cost;
mod filter;
mod sock;
use sock::{ifindex, Sock};

const GUEST: Mac = Mac(0x02, 0x47, 0x53, 0x54, 0x00, 0x01);
const STRANGER: Mac = Mac(0x02, 0x47, 0x53, 0x54, 0x00, 0x99);
const FAR: Mac = Mac(0x02, 0x47, 0x53, 0x54, 0x00, 0x98);
const BROADCAST: Mac = Mac(0xff, 0xff, 0xff, 0xff, 0xff, 0xff);

fn run(cmd: &str, args: &str) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args.split_whitespace())
        .output()
        .map_err(|e| format!("cannot run `{cmd} {args}`: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`{cmd} {args}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn ip(args: &str) {
    run("ip", args).unwrap();
}

/// Moves this thread into a new network namespace, IPv6 off (no stray Neighbor Discovery).
fn netns() -> Result<(), String> {
    // SAFETY: unshare only moves this (test-spawned) thread into a new network namespace.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(format!("unshare: {}", io::Error::last_os_error()));
    }
    for key in ["all", "default"] {
        std::fs::write(format!("/proc/sys/net/ipv6/conf/{key}/disable_ipv6"), "1")
            .map_err(|e| format!("disable_ipv6: {e}"))?;
    }
    ip("link set lo up");
    Ok(())
}

fn veth(a: &str, b: &str) {
    ip(&format!("link add {a} type veth peer name {b}"));
    ip(&format!("link set {a} up"));
    ip(&format!("link set {b} up"));
}

/// The frames among `frames` that carry `marker`.
fn with(frames: &[Vec<u8>], marker: &[u8]) -> Vec<Vec<u8>> {
    frames
        .iter()
        .filter(|f| f.windows(marker.len()).any(|w| w == marker))
        .cloned()
        .collect()
}

/// A frame: `tag` in it when given, then an IPv4 header and `marker` as the payload.
fn frame(dst: Mac, src: Mac, tag: Option<u16>, marker: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&src.octets());
    if let Some(v) = tag {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&v.to_be_bytes());
    }
    f.extend_from_slice(&[0x08, 0x00]);
    let at = f.len();
    // A header the bridge's IPv4 checks accept (length and checksum right), no protocol.
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[8] = 64;
    ip[9] = 253;
    ip[12..16].copy_from_slice(&[198, 18, 0, 9]);
    ip[16..20].copy_from_slice(&[198, 18, 0, 1]);
    f.extend_from_slice(&ip);
    f.extend_from_slice(marker);
    f.resize(f.len().max(60), 0);
    let total = (f.len() - at) as u16;
    f[at + 2..at + 4].copy_from_slice(&total.to_be_bytes());
    let sum = f[at..at + 20]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum::<u32>();
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = !((sum & 0xffff) + (sum >> 16)) as u16;
    f[at + 10..at + 12].copy_from_slice(&sum.to_be_bytes());
    f
}

/// A frame to this MAC leaves the bond tagged VLAN 5 in `vlan_tci` (see [`tagger`]).
const TAG_ME: Mac = Mac(0x02, 0x47, 0x53, 0x54, 0x00, 0x55);

/// What sends a frame through `dev` with a VLAN 5 tag in `vlan_tci`, as a VLAN device between
/// bridge and bond does: the VLAN device where the kernel has them, else [`tagger`] (this
/// host's kernel has no VLAN devices; older kernels have no tcx); and what keeps it there.
fn tag_out(dev: &str) -> Result<(Sock, Option<OwnedFd>), String> {
    let name = format!("{dev}.5");
    match run(
        "ip",
        &format!("link add link {dev} name {name} type vlan id 5"),
    ) {
        Ok(_) => {
            ip(&format!("link set {name} up"));
            Ok((Sock::open(&name), None))
        }
        Err(v) => {
            let link = tagger(dev).map_err(|t| format!("no VLAN device ({v}), {t}"))?;
            Ok((Sock::open(dev), Some(link)))
        }
    }
}

/// A program first at `dev`'s egress (a tcx link, before any filter) that puts a VLAN 5 tag
/// into `vlan_tci` of frames to [`TAG_ME`], then gives no verdict.
fn tagger(dev: &str) -> Result<OwnedFd, String> {
    use crate::capture::ebpf::insn::{Alu, Asm, Cond, Helper, Reg::*, Size};
    let mut a = Asm::new();
    let out = a.label();
    a.mov(R6, R1);
    a.ldx(Size::W, R2, R6, 76).ldx(Size::W, R3, R6, 80);
    a.mov(R0, R2).alu_imm(Alu::Add, R0, 6);
    a.jmp_reg(Cond::Gt, R0, R3, out);
    a.ldx(Size::B, R0, R2, 5);
    a.jmp_imm(Cond::Ne, R0, 0x55, out);
    let proto = i32::from(u16::from_ne_bytes([0x81, 0x00]));
    a.mov(R1, R6).mov_imm(R2, proto).mov_imm(R3, 5);
    a.call(Helper::SkbVlanPush);
    a.bind(out);
    a.mov_imm(R0, -1).exit();
    let prog = crate::capture::ebpf::sys::prog_load(3, &a.finish()?, "rlbdtest_tag")
        .map_err(|e| format!("tagger: {e}"))?;
    crate::capture::ebpf::sys::tcx_link(prog.as_fd(), ifindex(dev), false)
        .map_err(|e| format!("tagger's tcx link: {e}"))
}

/// `f` with a tag of VLAN `vlan` put in.
fn tagged(f: &[u8], vlan: u16) -> Vec<u8> {
    [&f[..12], &[0x81, 0x00], &vlan.to_be_bytes(), &f[12..]].concat()
}

const WAIT: Duration = Duration::from_millis(300);

fn egress_redirects(links: bool) -> Result<(), String> {
    netns()?;
    veth("bond0", "bpeer");
    veth("sb", "sbpeer");
    let (on_tag_out, tagger) = tag_out("bond0")?;
    let maps = GuestMaps::new(16).unwrap();
    let prog = maps.load_egress("bond0").unwrap();
    let (i, name) = (ifindex("bond0"), prog_name("bond0"));
    let at =
        HookAttached::attach("bond0", i, Direction::Egress, prog.as_fd(), &name, links).unwrap();
    if links && at.how() != "tcx" {
        return Err("this kernel has no tcx".into());
    }
    assert_eq!(at.how(), if links { "tcx" } else { "cls_bpf" });
    let sb = ifindex("sb");
    maps.pin(GUEST, 0, sb).unwrap();
    maps.pin(GUEST, 5, sb).unwrap();
    assert_eq!(maps.pinned_to(GUEST, 5).unwrap(), Some(sb));
    for (vlan, ifindex) in [(4096, sb), (0, 0)] {
        let e = maps.pin(STRANGER, vlan, ifindex).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
    assert_eq!(maps.pinned_to(STRANGER, 0).unwrap(), None);
    let on_bond = Sock::open("bond0");
    let (sbp, bp) = (Sock::open("sbpeer"), Sock::open("bpeer"));
    let cases = [
        frame(BROADCAST, GUEST, None, b"guest-untagged"),
        frame(FAR, GUEST, Some(5), b"guest-tag-in-frame"),
        frame(TAG_ME, GUEST, None, b"guest-tag-out"),
        frame(FAR, STRANGER, None, b"stranger"),
        frame(FAR, GUEST, Some(7), b"guest-vlan7"),
        frame(TAG_ME, STRANGER, None, b"stranger-tag-out"),
    ];
    let times = [3, 2, 2, 2, 1, 1];
    for (f, n) in cases.iter().zip(times) {
        let sock = if f[..6] == TAG_ME.octets() {
            &on_tag_out
        } else {
            &on_bond
        };
        for _ in 0..n {
            sock.send(f);
        }
    }
    let (sbp, bp) = (sbp.drain(WAIT), bp.drain(WAIT));
    // The guest's frames leave through its slave with their bytes (source MAC and tag
    // included) as sent, and not through the bond's own path.
    let want = [
        vec![cases[0].clone(); 3],
        vec![cases[1].clone(); 2],
        vec![tagged(&cases[2], 5); 2],
    ];
    for (m, w) in [
        &b"guest-untagged"[..],
        b"guest-tag-in-frame",
        b"guest-tag-out",
    ]
    .iter()
    .zip(want)
    {
        assert_eq!(with(&sbp, m), w, "{}", String::from_utf8_lossy(m));
        assert!(with(&bp, m).is_empty(), "{}", String::from_utf8_lossy(m));
    }
    // Everyone else's take the bond's path, untouched.
    assert_eq!(with(&bp, b"stranger\0"), vec![cases[3].clone(); 2]);
    assert_eq!(with(&bp, b"guest-vlan7"), vec![cases[4].clone()]);
    assert_eq!(with(&bp, b"stranger-tag-out"), vec![tagged(&cases[5], 5)]);
    for m in [&b"stranger"[..], b"guest-vlan7"] {
        assert!(with(&sbp, m).is_empty());
    }
    let c0 = maps.counters(GUEST, 0).unwrap().unwrap();
    assert_eq!((c0.tx_packets, c0.tx_bytes), (3, 3 * cases[0].len() as u64));
    let c5 = maps.counters(GUEST, 5).unwrap().unwrap();
    // `skb->len`: a tag in the frame counts, one in `vlan_tci` does not.
    let bytes5 = 2 * (cases[1].len() + cases[2].len()) as u64;
    assert_eq!((c5.tx_packets, c5.tx_bytes), (4, bytes5));
    // Unpinned: the guest's frames take the bond's path again.
    assert!(maps.unpin(GUEST, 0).unwrap());
    assert!(!maps.unpin(GUEST, 0).unwrap());
    assert_eq!(maps.pinned_to(GUEST, 0).unwrap(), None);
    let (sbp, bp) = (Sock::open("sbpeer"), Sock::open("bpeer"));
    on_bond.send(&cases[0]);
    assert_eq!(with(&bp.drain(WAIT), b"guest-untagged").len(), 1);
    assert!(with(&sbp.drain(WAIT), b"guest-untagged").is_empty());
    drop(at);
    drop(tagger);
    nothing_left("bond0")
}

/// Nothing of rlbd's left at `dev`'s hooks: no tcx program, no filter, no qdisc.
/// A tcx link goes when its last file reference does: a child another test thread forks holds a
/// copy of every descriptor from its fork until its exec, so a link just closed here may stay
/// attached for that moment (seen when these tests run in parallel: 1-2 programs "left").
fn nothing_left(dev: &str) -> Result<(), String> {
    for ingress in [true, false] {
        let count = || crate::capture::ebpf::tcx_programs(ifindex(dev), ingress).unwrap_or(0);
        let end = std::time::Instant::now() + Duration::from_secs(2);
        while count() > 0 && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(count(), 0, "{dev}: tcx programs left");
    }
    let q = run("tc", &format!("qdisc show dev {dev}"))?;
    assert!(!q.contains("clsact"), "{dev}: {q}");
    Ok(())
}

#[test]
fn egress_redirects_a_pinned_guest_through_tcx() {
    in_own_thread("guest egress (tcx)", || egress_redirects(true));
}

#[test]
fn egress_redirects_a_pinned_guest_through_cls_bpf() {
    in_own_thread("guest egress (cls_bpf)", || egress_redirects(false));
}

/// The host bridge br0 with the slaves `sa` (port slot 0) and `sb` (1) and the guest's port
/// `vm`; the switch's side: `sapeer`, `sbpeer`; the guest's: `vmpeer`.
fn bridge() {
    // No STP: ports forward at once instead of after 15 s of learning.
    ip("link add br0 type bridge forward_delay 0");
    ip("link set br0 up");
    for (a, b) in [("sa", "sapeer"), ("sb", "sbpeer"), ("vm", "vmpeer")] {
        veth(a, b);
        ip(&format!("link set {a} master br0"));
    }
    let end = std::time::Instant::now() + Duration::from_secs(3);
    while run("bridge", "link show")
        .unwrap()
        .matches("state forwarding")
        .count()
        < 3
    {
        assert!(
            std::time::Instant::now() < end,
            "br0's ports never forwarded"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Where br0 has learned `mac`.
fn learned_on(mac: Mac) -> Option<String> {
    let fdb = run("bridge", "fdb show br br0").unwrap();
    fdb.lines()
        .find(|l| l.starts_with(&mac.to_string()))
        .and_then(|l| l.split_whitespace().nth(2).map(str::to_owned))
}

fn ingress_drops_and_counts(links: bool) -> Result<(), String> {
    netns()?;
    bridge();
    let (sa, sb) = (ifindex("sa"), ifindex("sb"));
    // rlbd's counting program first, counting frames for the guest's MAC (as one of the
    // host's): it must still see the floods the guest program drops after it.
    let mut count = KernelCounter::new(&[GUEST], Hook::tc(128), 1024, "sa")
        .map_err(|e| format!("counting program: {e}"))?;
    count.attach_tc("sa", sa, links).unwrap();
    let maps = GuestMaps::new(16).unwrap();
    let mut hooks = Vec::new();
    for (dev, i, slot) in [("sa", sa, 0), ("sb", sb, 1)] {
        let prog = maps.load_ingress(dev, i, slot).unwrap();
        let at = HookAttached::attach(
            dev,
            i,
            Direction::Ingress,
            prog.as_fd(),
            &prog_name(dev),
            links,
        )
        .unwrap();
        hooks.push(at);
    }
    let (sap, sbp, vmp) = (
        Sock::open("sapeer"),
        Sock::open("sbpeer"),
        Sock::open("vmpeer"),
    );
    // The guest speaks: br0 learns it on its port.
    vmp.send(&frame(BROADCAST, GUEST, None, b"hello"));
    assert_eq!(with(&sap.drain(WAIT), b"hello").len(), 1);
    assert_eq!(learned_on(GUEST).as_deref(), Some("vm"));
    maps.pin(GUEST, 0, sb).unwrap();
    maps.pin(GUEST, 5, sb).unwrap();

    let sends = [
        // Its broadcast reflected back by the switch onto the other slave: dropped.
        (&sap, frame(BROADCAST, GUEST, None, b"reflect-a"), 3),
        (&sap, frame(BROADCAST, GUEST, Some(5), b"reflect-5"), 1),
        // Frames for it flooded onto the other slave: dropped.
        (&sap, frame(GUEST, STRANGER, None, b"flood-a"), 4),
        (&sap, frame(GUEST, STRANGER, Some(5), b"flood-5"), 2),
        // Frames for it on its slave: counted, delivered.
        (&sbp, frame(GUEST, STRANGER, None, b"guest-a"), 5),
        (&sbp, frame(GUEST, STRANGER, Some(5), b"guest-5"), 2),
        // Anyone else's: untouched (br0 floods the unknown unicast to the guest's port).
        (&sap, frame(FAR, STRANGER, None, b"stranger"), 2),
    ];
    for (s, f, n) in &sends {
        for _ in 0..*n {
            s.send(f);
        }
    }
    let at_vm = vmp.drain(WAIT);
    let seen = |m: &[u8]| with(&at_vm, m).len();
    for (m, want) in [
        (&b"reflect-a"[..], 0),
        (b"reflect-5", 0),
        (b"flood-a", 0),
        (b"flood-5", 0),
        (b"guest-a", 5),
        (b"guest-5", 2),
        (b"stranger", 2),
    ] {
        assert_eq!(seen(m), want, "{}", String::from_utf8_lossy(m));
    }
    // br0 never learned the guest on a slave.
    assert_eq!(learned_on(GUEST).as_deref(), Some("vm"));
    let (c0, c5) = (
        maps.counters(GUEST, 0).unwrap().unwrap(),
        maps.counters(GUEST, 5).unwrap().unwrap(),
    );
    assert_eq!((c0.reflections, c0.floods, c0.seen_from_switch), (3, 4, 0));
    assert_eq!((c5.reflections, c5.floods), (1, 2));
    assert_eq!(c0.rx[1], (5, 5 * sends[4].1.len() as u64));
    // The tag was taken out on the way in: the wire length counted is the frame's without it.
    assert_eq!(c5.rx[1], (2, 2 * (sends[5].1.len() - 4) as u64));
    assert_eq!((c0.rx[0], c5.rx[0]), ((0, 0), (0, 0)));
    // The counting program ran first: it counted the floods for "its" MAC that were dropped.
    let mut d = Vec::new();
    count.read(&mut d).unwrap();
    let counted: u64 = d.iter().map(|x| x.frames).sum();
    assert_eq!(counted, 6, "{d:?}");

    // The guest migrated: its frame comes from the switch on its own slave. Counted, passed,
    // and br0 learns where it is now.
    sbp.send(&frame(BROADCAST, GUEST, None, b"moved"));
    assert_eq!(with(&vmp.drain(WAIT), b"moved").len(), 1);
    let c0 = maps.counters(GUEST, 0).unwrap().unwrap();
    assert_eq!(c0.seen_from_switch, 1);
    assert_eq!(learned_on(GUEST).as_deref(), Some("sb"));

    let readings = maps.read().unwrap();
    assert_eq!(readings.len(), 2);
    assert_eq!((readings[0].guest.vlan, readings[0].ifindex), (0, sb));
    drop(hooks);
    drop(count);
    nothing_left("sa")?;
    nothing_left("sb")
}

#[test]
fn ingress_drops_reflections_and_floods_and_counts_through_tcx() {
    in_own_thread("guest ingress (tcx)", || ingress_drops_and_counts(true));
}

#[test]
fn ingress_drops_reflections_and_floods_and_counts_through_cls_bpf() {
    in_own_thread("guest ingress (cls_bpf)", || {
        ingress_drops_and_counts(false)
    });
}

/// An operator's filter at the guest priority is left alone: attaching fails.
fn operators_filter_kept() -> Result<(), String> {
    netns()?;
    veth("bond0", "bpeer");
    run("tc", "qdisc add dev bond0 clsact")?;
    run(
        "tc",
        &format!("filter add dev bond0 egress prio {GUEST_PRIO} u32 match u32 0 0"),
    )?;
    let maps = GuestMaps::new(4).unwrap();
    let prog = maps.load_egress("bond0").unwrap();
    let name = prog_name("bond0");
    let i = ifindex("bond0");
    let e = HookAttached::attach("bond0", i, Direction::Egress, prog.as_fd(), &name, false)
        .unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
    let f = run("tc", "filter show dev bond0 egress")?;
    assert!(f.contains("u32") && !f.contains("rlbdg_"), "{f}");
    // With links the program goes beside it, and goes alone.
    // (Without tcx, the fallback is a filter, refused as above.)
    let at = HookAttached::attach("bond0", i, Direction::Egress, prog.as_fd(), &name, true)
        .map_err(|e| format!("this kernel has no tcx? {e}"))?;
    assert_eq!(at.how(), "tcx");
    drop(at);
    let f = run("tc", "filter show dev bond0 egress")?;
    assert!(f.contains("u32"), "{f}");
    assert!(run("tc", "qdisc show dev bond0")?.contains("clsact"));
    Ok(())
}

#[test]
fn an_operators_filter_at_the_guest_priority_is_never_touched() {
    in_own_thread("guest operator's filter", operators_filter_kept);
}

/// The programs as the packaged unit loads them: without CAP_SYS_ADMIN nor CAP_PERFMON
/// (see `unprivileged_tests.rs`), for whom the verifier is stricter.
fn load_unprivileged() -> Result<(), String> {
    use crate::capture::ebpf::unprivileged_tests::{drop_effective, CAP_PERFMON, CAP_SYS_ADMIN};
    drop_effective(&[CAP_SYS_ADMIN, CAP_PERFMON]).map_err(|e| format!("capset: {e}"))?;
    let maps = GuestMaps::new(1024).map_err(|e| e.to_string())?;
    maps.load_egress("bond0").map_err(|e| e.to_string())?;
    for slot in [0, MAX_PORTS - 1] {
        maps.load_ingress("eth1", 7, slot)
            .map_err(|e| e.to_string())?;
    }
    maps.pin(GUEST, 0, 7).map_err(|e| e.to_string())?;
    Ok(())
}

#[test]
fn the_guest_programs_load_without_sys_admin_or_perfmon() {
    if !crate::test_support::root_or_skip("guest programs unprivileged") {
        return;
    }
    if let Err(e) = std::thread::spawn(load_unprivileged).join().unwrap() {
        panic!("{}", &e[e.len().saturating_sub(3000)..]);
    }
}

/// A guest filter a killed rlbd left is replaced in place, or removed with a link in its place.
fn stale_filter_goes() -> Result<(), String> {
    netns()?;
    veth("bond0", "bpeer");
    let maps = GuestMaps::new(4).unwrap();
    let prog = maps.load_egress("bond0").unwrap();
    let (i, name) = (ifindex("bond0"), prog_name("bond0"));
    let attach =
        |links| HookAttached::attach("bond0", i, Direction::Egress, prog.as_fd(), &name, links);
    // Killed: nothing removes its filter.
    std::mem::forget(attach(false).unwrap());
    let again = attach(false).unwrap();
    let f = run("tc", "filter show dev bond0 egress")?;
    let ours = f.lines().filter(|l| l.contains("handle 0x1be rlbdg_bond0"));
    assert_eq!(ours.count(), 1, "{f}");
    std::mem::forget(again);
    let link = attach(true).unwrap();
    if link.how() != "tcx" {
        return Err("this kernel has no tcx".into());
    }
    assert_eq!(run("tc", "filter show dev bond0 egress")?.trim(), "");
    assert!(!run("tc", "qdisc show dev bond0")?.contains("clsact"));
    drop(link);
    nothing_left("bond0")
}

#[test]
fn a_stale_guest_filter_is_replaced_or_removed() {
    in_own_thread("stale guest filter", stale_filter_goes);
}
