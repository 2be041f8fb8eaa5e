//! The counting's decisions, one by one, on plain data.

use std::sync::Arc;

use log::Level;

use super::*;
use crate::engine::io::PortId;

fn port(i: usize) -> PortRef {
    PortRef {
        id: PortId::new(i),
        ifindex: 10 + i as u32,
        name: Arc::from(format!("p{i}").as_str()),
    }
}

fn drain(out: &mut Outbox) -> Vec<Output> {
    std::iter::from_fn(|| out.pop()).collect()
}

fn logs(outs: &[Output]) -> Vec<(Level, String)> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Log { level, text, .. } => Some((*level, text.clone())),
            _ => None,
        })
        .collect()
}

fn facts() -> HookFacts {
    HookFacts {
        store: "hash",
        tc_attach: None,
        store_fallback: Some("no mmapable arrays".into()),
    }
}

#[test]
fn the_hooks_are_tried_tc_then_socket_and_a_refusal_of_both_is_told_once_per_port() {
    let mut c = Counting::new(KernelCounting::Require, None);
    let mut out = Outbox::default();
    let p = port(0);
    assert!(!c.opened(&p, true, &mut out));
    let tc = CountingHook::Tc;
    let sock = CountingHook::Socket;
    let asked = drain(&mut out);
    assert_eq!(
        asked,
        [Output::AttachHook {
            port: p.clone(),
            hook: tc
        }]
    );
    assert!(!c.hook_attached(&p, tc, Err("EPERM".into()), &mut out));
    let asked = drain(&mut out);
    assert_eq!(
        asked,
        [Output::AttachHook {
            port: p.clone(),
            hook: sock
        }]
    );
    assert!(!c.settled(0));
    // An answer for a hook not asked for changes nothing.
    assert!(!c.hook_attached(&p, tc, Ok(facts()), &mut out));
    assert!(c.hook_attached(&p, sock, Err("EINVAL".into()), &mut out));
    assert!(c.settled(0));
    assert_eq!(c.hook(0), None);
    assert_eq!(
        logs(&drain(&mut out)),
        [(
            Level::Error,
            "port p0: cannot count in the kernel (EINVAL); counting every captured frame".into()
        )]
    );
    // Opened again, refused again: not told again.
    c.opened(&p, true, &mut out);
    c.hook_attached(&p, tc, Err("EPERM".into()), &mut out);
    c.hook_attached(&p, sock, Err("EINVAL".into()), &mut out);
    assert!(logs(&drain(&mut out)).is_empty());
}

#[test]
fn the_socket_after_tc_says_why_not_tc_and_where_the_counts_live() {
    let mut c = Counting::new(KernelCounting::Try, Some(100_000));
    let mut out = Outbox::default();
    let p = port(1);
    c.opened(&p, true, &mut out);
    c.hook_attached(&p, CountingHook::Tc, Err("no clsact".into()), &mut out);
    assert!(c.hook_attached(&p, CountingHook::Socket, Ok(facts()), &mut out));
    assert_eq!(c.hook(1), Some(CountingHook::Socket));
    let texts: Vec<String> = logs(&drain(&mut out)).into_iter().map(|l| l.1).collect();
    assert_eq!(
        texts,
        [
            "port p1: counting every frame in the kernel (eBPF, map: hash, hook: socket)",
            "port p1: not at the tc hooks (no clsact): a filter on the capture socket instead, \
             every frame through a packet tap",
            "port p1: no slot table here (no mmapable arrays): the hash instead",
        ]
    );
}

#[test]
fn a_socket_that_did_not_open_or_counting_off_is_settled_at_once() {
    let mut out = Outbox::default();
    let mut c = Counting::new(KernelCounting::Try, None);
    assert!(c.opened(&port(0), false, &mut out));
    let mut c = Counting::new(KernelCounting::Off, None);
    assert!(c.opened(&port(0), true, &mut out));
    assert!(c.settled(0));
    assert!(drain(&mut out).is_empty());
}

fn second(drops: Option<u64>, map: MapRead) -> PortSecond {
    PortSecond {
        hook_packets: None,
        ring_drops: drops,
        map,
    }
}

#[test]
fn ring_drops_spoil_the_rates_only_where_the_ring_carries_the_counted_frames() {
    let mut out = Outbox::default();
    let mut c = Counting::new(KernelCounting::Try, None);
    let refs = [port(0), port(1)];
    for r in &refs {
        c.opened(r, true, &mut out);
    }
    // p0 counts at tc; p1 from captured frames.
    c.hook_attached(&refs[0], CountingHook::Tc, Ok(facts()), &mut out);
    c.hook_attached(&refs[1], CountingHook::Tc, Err("x".into()), &mut out);
    c.hook_attached(&refs[1], CountingHook::Socket, Err("y".into()), &mut out);
    drain(&mut out);
    let read = MapRead::Read { lost: 0 };
    let f = [
        second(Some(5), read.clone()),
        second(Some(0), MapRead::NotCounting),
    ];
    assert_eq!(c.second(1000, &f, &refs, &mut out), (true, false));
    assert_eq!(
        logs(&drain(&mut out)),
        [(Level::Warn, "port p0: capture ring dropped 5 frames".into())]
    );
    let f = [second(Some(5), read), second(Some(3), MapRead::NotCounting)];
    assert_eq!(c.second(2000, &f, &refs, &mut out), (true, true));
    // The same count again is no new drop.
    assert_eq!(c.second(3000, &f, &refs, &mut out), (true, false));
}

#[test]
fn a_full_map_is_a_second_not_whole_and_its_frames_are_kept_as_uncounted() {
    let mut out = Outbox::default();
    let mut c = Counting::new(KernelCounting::Try, None);
    let refs = [port(0)];
    c.opened(&refs[0], true, &mut out);
    c.hook_attached(&refs[0], CountingHook::Tc, Ok(facts()), &mut out);
    drain(&mut out);
    let full = [second(None, MapRead::Read { lost: 4 })];
    assert!(!c.second(1000, &full, &refs, &mut out).0);
    assert!(!c.second(2000, &full, &refs, &mut out).0);
    assert_eq!(c.uncounted(0), 8);
    assert_eq!(logs(&drain(&mut out)).len(), 1, "told once an episode");
    let room = [second(None, MapRead::Read { lost: 0 })];
    assert!(c.second(3000, &room, &refs, &mut out).0);
    assert_eq!(
        logs(&drain(&mut out))[0].1,
        "port p0: the counting map has room again"
    );
    // A new socket starts a new map.
    c.opened(&refs[0], true, &mut out);
    assert_eq!(c.uncounted(0), 0);
}
