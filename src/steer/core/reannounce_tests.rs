//! The server re-announces its address (a gratuitous ARP request, as `arp_notify`, keepalived
//! or `arping -U` send it): every client rlbd moved takes the sender's MAC at once. Each is told
//! again in turn within the total rate limit, none shed, and a client waiting for its turn
//! keeps its place when its move is undone again.

use std::collections::HashMap;

use super::fixture::*;
use super::*;
use crate::host::testing::*;
use crate::policy::reassert::{ArpSeen, ARP_REQUEST};

/// The server's gratuitous request for its own address, from p0.
fn re_announcement() -> ArpSeen {
    ArpSeen {
        outgoing: true,
        op: ARP_REQUEST,
        eth_src: P[0],
        eth_dst: Mac::broadcast(),
        sha: P[0],
        spa: SERVER,
        tpa: SERVER,
        vlan: 0,
    }
}

/// 3,000 clients rlbd failed over off p0 (p0 back since), every send of that done by 10 s.
fn crowd_moved_off_p0() -> (World, Steerer) {
    let mut w = World::new();
    let snaps = crowd(&mut w, 3000, false);
    let mut s = Steerer::new(cfg());
    w.usable[0] = false;
    let ports = w.port_views();
    let mut out = Vec::new();
    w.with(|ctx| s.failover(0, &[0], &ports, &snaps, ctx, &mut out));
    while let Some(t) = s.next_due().filter(|t| *t < 10_000) {
        w.with(|ctx| s.on_timer(t, ctx, &mut out));
    }
    assert_eq!(s.counters().moves_failover, 3000);
    w.usable[0] = true;
    (w, s)
}

/// Runs the core's timers from `from` to `to` with re-announcements at `at`: when each client
/// was first told again after the first, and the sends of each second.
fn run(
    w: &World,
    s: &mut Steerer,
    (from, to): (u64, u64),
    at: &[u64],
) -> (HashMap<ClientKey, u64>, HashMap<u64, usize>) {
    let (mut told, mut per_sec) = (HashMap::new(), HashMap::new());
    let mut out = Vec::new();
    let mut now = from;
    let mut announcements = at.iter().copied().peekable();
    loop {
        for a in out.drain(..) {
            if let Action::Send { client, .. } = a {
                told.entry(client).or_insert(now);
                *per_sec.entry(now / 1000).or_insert(0) += 1;
            }
        }
        let timer = s.next_due().unwrap_or(u64::MAX);
        match announcements.peek().copied() {
            Some(a) if a <= timer => {
                now = a;
                announcements.next();
                w.with(|ctx| s.on_arp(now, &re_announcement(), ctx, &mut out));
            }
            _ if timer < to => {
                now = timer;
                w.with(|ctx| s.on_timer(now, ctx, &mut out));
            }
            _ => break,
        }
    }
    (told, per_sec)
}

#[test]
fn a_re_announcement_undoing_more_moves_than_the_total_limit_re_asserts_each_in_turn() {
    let (w, mut s) = crowd_moved_off_p0();
    let (told, per_sec) = run(&w, &mut s, (20_000, 40_000), &[20_000]);
    assert_eq!(told.len(), 3000, "every client is told again");
    let last = told.values().max().copied().unwrap_or(0);
    // 1,000 at once (the bucket's burst), 2,000 waiting at 1,000 a second, give or take the
    // repeats of the first 1,000.
    assert!(last < 20_000 + 2_100, "the last told again at {last} ms");
    assert!(per_sec.values().all(|&k| k <= 2000), "{per_sec:?}");
}

#[test]
fn a_client_waiting_for_its_turn_keeps_it_when_its_move_is_undone_again() {
    let (w, mut s) = crowd_moved_off_p0();
    let (first, _) = run(&w, &mut s, (20_000, 20_500), &[20_000]);
    // Half a second in, about 1,500 have been told again; the others hold turns up to about
    // 22 s. A second announcement undoes every move again: those told take new turns after
    // the last one handed out, those waiting keep theirs (taking new ones would put all 3,000
    // behind 22 s).
    let (told, per_sec) = run(&w, &mut s, (20_500, 40_000), &[20_500]);
    assert_eq!(told.len(), 3000, "every client is told again");
    let last = told.values().max().copied().unwrap_or(0);
    let bound = 22_000 + first.len() as u64 + 300;
    assert!(
        last < bound,
        "the last told again at {last} ms ({} before)",
        first.len()
    );
    assert!(per_sec.values().all(|&k| k <= 2000), "{per_sec:?}");
    let settled = (0..3000u16).filter(|i| {
        let [hi, lo] = i.to_be_bytes();
        let key = ClientKey::untagged(Mac(2, 1, 0, 0, hi, lo));
        s.moved(&key)
            .is_some_and(|m| m.undone.is_none() && m.turn.is_none())
    });
    assert_eq!(settled.count(), 3000, "every move told again, no turn left");
}
