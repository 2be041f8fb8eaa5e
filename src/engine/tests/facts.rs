//! The shell reports, the engine decides: each decision that moved out of the shell, through the
//! door (the hook and its fallback, the sampling ratio, the drop veto, the whole second, which
//! frames are the server's load, the reload's answer), and outputs that name their port
//! completely.

use super::*;

/// The rig's outputs of one kind.
fn hooks(r: &Rig) -> Vec<(String, CountingHook)> {
    r.others
        .iter()
        .filter_map(|o| match o {
            Output::AttachHook { port, hook } => Some((port.name.to_string(), *hook)),
            _ => None,
        })
        .collect()
}

fn ratios(r: &Rig) -> Vec<(String, u32)> {
    r.others
        .iter()
        .filter_map(|o| match o {
            Output::SetSampling { port, one_in } => Some((port.name.to_string(), *one_in)),
            _ => None,
        })
        .collect()
}

fn status(r: &mut Rig) -> crate::status::StatusReport {
    r.e.handle(r.now, Input::StatusQuery { top: None });
    let s = std::iter::from_fn(|| r.e.poll_output()).find_map(|o| match o {
        Output::Status(s) => Some(*s),
        _ => None,
    });
    s.expect("a status")
}

fn logged(r: &Rig, words: &str) -> usize {
    r.logs.iter().filter(|(_, t)| t.contains(words)).count()
}

fn sampled(limit: u32) -> Settings {
    let mut s = settings();
    s.capture.max_frames_per_sec = limit;
    s
}

#[test]
fn every_port_counts_at_tc_first_and_the_output_names_it_completely() {
    let mut r = Rig::new();
    let asked: Vec<_> = r
        .others
        .iter()
        .filter_map(|o| match o {
            Output::AttachHook { port, .. } => Some((port.id, port.ifindex, port.name.clone())),
            _ => None,
        })
        .collect();
    let want: Vec<_> = (0..3)
        .map(|i| (PortId::new(i), SLAVES[i], format!("sl{i}").into()))
        .collect();
    assert_eq!(asked, want);
    assert_eq!(
        hooks(&r).iter().filter(|h| h.1 == CountingHook::Tc).count(),
        3
    );
    assert_eq!(
        logged(
            &r,
            "counting every frame in the kernel (eBPF, map: slots, hook: tc, attached: tcx)"
        ),
        3
    );
    let st = status(&mut r);
    assert!(st
        .ports
        .iter()
        .all(|p| p.counting_hook.as_deref() == Some("tc")));
    assert!(st
        .ports
        .iter()
        .all(|p| p.counting == crate::status::Counting::Ebpf));
}

#[test]
fn a_tc_hook_that_refuses_falls_back_to_the_socket_filter() {
    let r = Rig::with(settings(), &[CountingHook::Tc]);
    let sl0: Vec<_> = hooks(&r).into_iter().filter(|h| h.0 == "sl0").collect();
    assert_eq!(
        sl0,
        [
            ("sl0".into(), CountingHook::Tc),
            ("sl0".into(), CountingHook::Socket)
        ]
    );
    assert_eq!(
        logged(&r, "port sl0: not at the tc hooks (sl0: tc refused)"),
        1
    );
    assert_eq!(logged(&r, "hook: socket)"), 3);
}

#[test]
fn a_port_neither_hook_takes_counts_captured_frames_and_says_so_once() {
    let mut r = Rig::with(settings(), &[CountingHook::Tc, CountingHook::Socket]);
    assert_eq!(hooks(&r).len(), 6, "tc, then the socket, per port");
    assert_eq!(logged(&r, "port sl1: cannot count in the kernel (sl1: socket refused); counting from captured frames (sampled when busy)"), 1);
    let st = status(&mut r);
    assert!(st.ports.iter().all(|p| p.counting_hook.is_none()));
    assert!(st
        .ports
        .iter()
        .all(|p| p.counting == crate::status::Counting::Exact));
}

#[test]
fn with_kernel_counting_off_no_hook_is_asked_for() {
    let mut s = settings();
    s.capture.sampling = "off".into();
    let r = Rig::with(s, &[]);
    assert!(hooks(&r).is_empty(), "{:?}", r.others);
}

/// Two clients of 6 Mbit/s on a 10 Mbit/s slave: a move is due after a few seconds.
fn overload(r: &mut Rig, facts: impl Fn(u64) -> Vec<PortSecond>) -> usize {
    for s in 0..6 {
        r.facts = facts(s);
        r.second(&[(1, 0, 6.0), (2, 0, 6.0)]);
    }
    (1..=2).filter(|n| !r.moves_of(*n).is_empty()).count()
}

fn drops_every_second(s: u64) -> Vec<PortSecond> {
    let f = PortSecond {
        ring_drops: Some(10 * (s + 1)),
        ..Default::default()
    };
    vec![f; 3]
}

#[test]
fn ring_drops_veto_the_moves_of_a_port_that_counts_captured_frames() {
    let mut r = Rig::with(settings(), &[CountingHook::Tc, CountingHook::Socket]);
    assert_eq!(overload(&mut r, drops_every_second), 0, "{:?}", r.logs);
    assert!(logged(&r, "port sl0: capture ring dropped 10 frames") > 0);
    let st = status(&mut r);
    assert!(st.totals.unreliable_seconds >= 3, "{:?}", st.totals);
}

#[test]
fn ring_drops_where_the_kernel_counts_leave_the_rates_whole() {
    // At the tc hook the rings carry only ARP and ND: an ARP storm must not stop every move.
    let mut r = Rig::new();
    assert_eq!(overload(&mut r, drops_every_second), 1, "{:?}", r.logs);
    assert!(logged(&r, "capture ring dropped") > 0);
}

#[test]
fn a_full_counting_map_makes_the_second_not_whole_and_is_told_once_an_episode() {
    let full = |_| {
        let f = PortSecond {
            map: MapRead::Read { lost: 7 },
            ..Default::default()
        };
        vec![f; 3]
    };
    let mut r = Rig::new();
    assert_eq!(
        overload(&mut r, full),
        0,
        "no move on such seconds: {:?}",
        r.logs
    );
    assert_eq!(
        logged(&r, "port sl0: the counting map is full (7 frames"),
        1
    );
    assert_eq!(status(&mut r).ports[0].uncounted_frames, 42);
    r.facts = vec![PortSecond {
        map: MapRead::Read { lost: 0 },
        ..Default::default()
    }];
    r.second(&[]);
    assert_eq!(logged(&r, "port sl0: the counting map has room again"), 1);
    // A map that cannot be read is a second not whole too, and says why.
    let failed = |_| {
        vec![PortSecond {
            map: MapRead::Failed("sl0: reading the counting map: EIO".into()),
            ..Default::default()
        }]
    };
    let mut r = Rig::new();
    assert_eq!(overload(&mut r, failed), 0);
    assert_eq!(
        logged(&r, "port sl0: sl0: reading the counting map: EIO"),
        6
    );
    // Read whole, the same load moves one client.
    let whole = |_| {
        vec![
            PortSecond {
                map: MapRead::Read { lost: 0 },
                ..Default::default()
            };
            3
        ]
    };
    assert_eq!(overload(&mut Rig::new(), whole), 1);
}

#[test]
fn a_port_counting_in_the_kernel_is_sampled_from_the_packets_its_program_saw() {
    let mut r = Rig::with(sampled(100), &[]);
    // 1000 packets a second at the hook, a limit of 100: one in 16 (the power of two over 10).
    for s in 0..3 {
        r.facts = vec![PortSecond {
            hook_packets: Some(1000 * s),
            ..Default::default()
        }];
        r.second(&[]);
    }
    assert_eq!(ratios(&r), [("sl0".to_string(), 16)]);
    assert_eq!(
        logged(&r, "port sl0: counting one frame in 16 in the kernel"),
        1
    );
    assert_eq!(
        status(&mut r).ports[0].counting,
        crate::status::Counting::Ebpf
    );
    // Its link counter does not choose its ratio (under GRO it counts far more packets).
    let ev = [NlEvent::Link(LinkInfo {
        rx_packets: Some(10_000_000),
        ..match slave(1, 0) {
            NlEvent::Link(l) => l,
            _ => unreachable!(),
        }
    })];
    r.e.handle(r.now, Input::Netlink(&ev));
    r.drain();
    assert_eq!(ratios(&r).len(), 1);
    // A reload that switches sampling off counts every frame again at once.
    let mut s = sampled(100);
    s.capture.sampling = "off".into();
    r.e.handle(
        r.now,
        Input::Reload {
            settings: Box::new(s),
            why: "test",
        },
    );
    r.drain();
    assert_eq!(ratios(&r).last(), Some(&("sl0".to_string(), 1)));
}

fn slave_packets(i: usize, packets: u64) -> NlEvent {
    let NlEvent::Link(l) = slave(i, packets * 100) else {
        unreachable!()
    };
    NlEvent::Link(LinkInfo {
        rx_packets: Some(packets),
        ..l
    })
}

#[test]
fn a_port_counting_captured_frames_is_sampled_from_its_counter_and_its_drains() {
    let mut r = Rig::with(sampled(100), &[CountingHook::Tc, CountingHook::Socket]);
    for s in 0..3u64 {
        r.now += 1000;
        let ev = [slave_packets(2, 800 * s)];
        r.e.handle(r.now, Input::Netlink(&ev));
        r.drain();
    }
    assert_eq!(ratios(&r), [("sl2".to_string(), 8)]);
    assert_eq!(logged(&r, "port sl2: counting one frame in 8"), 1);
    // A surge in what a drain hands over raises another port's ratio before its counter does.
    let port = PortId::new(0);
    for t in 0..4 {
        let input = Input::Drained { port, frames: 100 };
        r.e.handle(r.now + t * 50, input);
        r.drain();
    }
    assert!(
        ratios(&r).iter().any(|(n, k)| n == "sl0" && *k > 1),
        "{:?}",
        ratios(&r)
    );
}

#[test]
fn only_frames_for_the_servers_macs_are_its_load() {
    let mut r = Rig::new();
    let (mac, ip) = client(1);
    // Flooded here for another host (a promiscuous port, a switch that forgot a MAC).
    let flooded = Input::Counted {
        port: PortId::new(0),
        key: ClientKey::untagged(mac),
        src: IpAddr::V4(ip),
        dst: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
        bytes: 1500,
        for_host: false,
        dst_mac: Mac(2, 0, 0, 0, 7, 7),
    };
    r.e.handle(r.now, flooded);
    assert!(status(&mut r).clients.is_empty());
    let ours = Input::Counted {
        port: PortId::new(0),
        key: ClientKey::untagged(mac),
        src: IpAddr::V4(ip),
        dst: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
        bytes: 1500,
        for_host: true,
        dst_mac: Mac(2, 0, 0, 0, 1, SLAVES[0] as u8),
    };
    r.e.handle(r.now, ours);
    assert_eq!(status(&mut r).clients.len(), 1);
}

#[test]
fn a_frame_for_a_macvlan_on_the_bond_is_the_servers_load() {
    let mut r = Rig::new();
    let NlEvent::Link(mv) = link(40, "mv0", Some("macvlan")) else {
        unreachable!()
    };
    let ev = [NlEvent::Link(LinkInfo {
        parent: Some(BOND),
        ..mv
    })];
    r.e.handle(r.now, Input::Netlink(&ev));
    r.drain();
    let mv_mac = Mac(2, 0, 0, 0, 1, 40);
    let told = r.others.iter().rev().find_map(|o| match o {
        Output::HostMacs(m) => Some(m.clone()),
        _ => None,
    });
    assert!(told.is_some_and(|m| m.contains(&mv_mac)), "{:?}", r.others);
    let (mac, ip) = client(2);
    let input = Input::Counted {
        port: PortId::new(1),
        key: ClientKey::untagged(mac),
        src: IpAddr::V4(ip),
        dst: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
        bytes: 1500,
        for_host: false,
        dst_mac: mv_mac,
    };
    r.e.handle(r.now, input);
    assert_eq!(status(&mut r).clients.len(), 1);
}

fn reloaded(r: &Rig) -> Vec<Result<String, String>> {
    r.others
        .iter()
        .filter_map(|o| match o {
            Output::Reloaded(a) => Some(a.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_reload_is_answered_by_the_engine_with_what_only_a_restart_applies() {
    let mut r = Rig::new();
    r.others.clear();
    let mut s = settings();
    s.capture.table_size *= 2;
    let why = "reload request";
    r.e.handle(
        r.now,
        Input::Reload {
            settings: Box::new(s),
            why,
        },
    );
    r.drain();
    assert_eq!(
        reloaded(&r),
        [Ok(
            "configuration reloaded from built-in defaults; state kept; changed but applied \
             only by a restart: the capture table or ring size"
                .into()
        )]
    );
    assert_eq!(
        logged(&r, "reload request: the capture table or ring size changed"),
        1
    );
    // The answer comes first, so the shell's new log level holds for the reload's records.
    let first = r
        .others
        .iter()
        .position(|o| matches!(o, Output::Reloaded(_)));
    assert_eq!(first, Some(0), "{:?}", r.others);
    let error = "rlbd.toml:2: policy.threshold: expected a number".to_string();
    r.e.handle(r.now, Input::ReloadFailed { why, error });
    r.drain();
    let why_not = "configuration not reloaded: rlbd.toml:2: policy.threshold: expected a \
                   number; running on with the settings it had";
    assert_eq!(reloaded(&r)[1], Err(why_not.to_string()));
    assert_eq!(logged(&r, &format!("reload request: {why_not}")), 1);
}

fn guest_ports(r: &Rig) -> Vec<String> {
    r.others
        .iter()
        .filter_map(|o| match o {
            Output::GuestPort { port } => Some(port.name.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_ports_guest_program_is_asked_for_once_its_counting_hook_is_settled() {
    let mut s = settings();
    s.guests.enabled = true;
    let mut r = Rig::with(s, &[CountingHook::Tc]);
    assert!(guest_ports(&r).is_empty(), "no bridge over the bond yet");
    // A bridge over the bond: the path goes on, every settled port gets its part.
    let NlEvent::Link(bond) = link(BOND, "bond0", Some("bond")) else {
        unreachable!()
    };
    let ev = [
        link(50, "br0", Some("bridge")),
        NlEvent::Link(LinkInfo {
            master: Some(50),
            ..bond
        }),
    ];
    r.e.handle(r.now, Input::Netlink(&ev));
    r.drain();
    let on = r.others.iter().find_map(|o| match o {
        Output::GuestPath { on: true, bond } => Some(bond.clone()),
        _ => None,
    });
    assert_eq!(
        on,
        Some(Some((BOND, "bond0".to_string()))),
        "{:?}",
        r.others
    );
    assert_eq!(guest_ports(&r), ["sl0", "sl1", "sl2"]);
    // A slave that comes later: its guest part after tc refused and the socket took the
    // counting program, never before.
    r.others.clear();
    let NlEvent::Link(l) = link(24, "sl3", None) else {
        unreachable!()
    };
    let ev = [NlEvent::Link(LinkInfo {
        master: Some(BOND),
        ..l
    })];
    r.e.handle(r.now, Input::Netlink(&ev));
    r.drain();
    let order: Vec<String> = r
        .others
        .iter()
        .filter_map(|o| match o {
            Output::AttachHook { hook, .. } => Some(format!("hook {}", hook.as_str())),
            Output::GuestPort { port } => Some(format!("guest {}", port.name)),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["hook tc", "hook socket", "guest sl3"]);
}
