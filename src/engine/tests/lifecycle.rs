//! The start, the stop and the state dump are the engine's log records.

use super::*;

fn logged(r: &Rig, words: &str) -> usize {
    r.logs.iter().filter(|(_, t)| t.contains(words)).count()
}

#[test]
fn the_state_dump_and_the_start_are_the_engines_log_records() {
    let mut r = Rig::new();
    r.e.handle(r.now, Input::Started);
    r.drain();
    assert_eq!(
        logged(&r, "the server's interfaces: bond0"),
        1,
        "{:?}",
        r.logs
    );
    assert_eq!(
        logged(&r, "bond bond0: mode balance-alb"),
        1,
        "{:?}",
        r.logs
    );
    let captures = vec![
        CaptureFacts {
            ring_packets: 9,
            ring_drops: 4,
            sampling: 2,
        };
        3
    ];
    r.e.handle(
        r.now,
        Input::DumpState {
            captures: &captures,
        },
    );
    r.drain();
    assert_eq!(
        logged(&r, "ring drops 4 counting ebpf sampling 1/2 uncounted 0"),
        3,
        "{:?}",
        r.logs
    );
    assert_eq!(logged(&r, "  totals: moves overload 0, failover 0"), 1);
    r.e.handle(r.now, Input::Stopping { signal: 15 });
    r.drain();
    assert_eq!(logged(&r, "signal 15: exiting"), 1);
}
