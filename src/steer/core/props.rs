//! Properties of the steering core under any sequence of events: moves, the host's and clients'
//! ARP and Neighbor Discovery, neighbour entries and addresses coming and going, ports failing
//! and coming back, MACs changing, time passing, idle clients forgotten.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::host::Talk;

use super::props_harness as harness;

use harness::{key, op, Harness, Op, CLIENTS, PER_CLIENT, TOTAL};

/// The rules every step of a run is checked against.
impl Harness {
    /// Every frame sent goes only to a neighbour the kernel confirms, claims only an address of
    /// the server's, is tagged for the client's VLAN, leaves a live port, and keeps within the
    /// per-client and total rates.
    pub(super) fn check_actions(&mut self, out: &[Action]) {
        for a in out {
            let Action::Send {
                port,
                client,
                claim,
                frame,
                ..
            } = a
            else {
                continue;
            };
            // Only to a neighbour the kernel confirms, only for an address of the server's.
            assert!(
                self.w.host.confirms(*client, claim.client()),
                "sent to {client} for {} which the kernel does not confirm",
                claim.client()
            );
            assert!(
                self.w.host.is_ours(claim.server()),
                "claimed {}",
                claim.server()
            );
            // An address the client reaches on its own VLAN, in a frame tagged for it.
            assert!(
                self.w.host.on_link(claim.server(), client.vlan),
                "claimed {} toward {client}, not on its VLAN",
                claim.server()
            );
            if client.vlan == 0 {
                assert_ne!(frame[12..14], [0x81, 0x00], "tagged for an untagged client");
            } else {
                assert_eq!(frame[12..14], [0x81, 0x00]);
                assert_eq!(frame[14..16], client.vlan.to_be_bytes());
            }
            // From a live port, with its MAC, to the client.
            assert!(self.w.usable[*port], "sent from down port {port}");
            assert_eq!(frame[0..6], client.mac.octets());
            assert_eq!(frame[6..12], self.macs[*port].octets());
            let times = self.sends.entry(*client).or_default();
            times.push(self.now);
            // Token buckets: in any interval shorter than a second, at most a burst plus a
            // second's refill.
            let recent = times.iter().filter(|t| **t + 1000 > self.now).count();
            assert!(
                recent <= 2 * PER_CLIENT as usize,
                "{recent} frames to {client} within 1 s"
            );
            self.all_sends.push(self.now);
            let all = self
                .all_sends
                .iter()
                .filter(|t| **t + 1000 > self.now)
                .count();
            assert!(all <= 2 * TOTAL as usize, "{all} frames within 1 s");
        }
        for m in self.s.moved.values() {
            assert!(m.pending.len() <= MAX_PENDING_PER_CLIENT);
        }
    }

    /// No move stands whose every frame was refused with none left to send; a move one of
    /// whose frames went out stands.
    pub(super) fn check_refused(&self) {
        for (c, m) in &self.s.moved {
            assert!(
                m.confirmed || m.issued == 0 || m.refused < m.issued || !m.pending.is_empty(),
                "{c}: a move whose {} frames were all refused is believed made",
                m.issued
            );
            assert!(m.refused <= m.issued);
        }
    }

    /// Every moved client the kernel still confirms is on a live port, when one is left.
    pub(super) fn check_none_stranded(&self) {
        if !self.w.usable.iter().any(|u| *u) {
            return;
        }
        for (c, m) in &self.s.moved {
            let claims = self.w.host.claims_for(*c, &Talk::from_claims(&m.claims));
            if claims.is_ok() {
                assert!(self.w.usable[m.port], "{c} left on down port {}", m.port);
            }
        }
    }

    /// A burst of one frame is answered with at most one re-assertion per client.
    pub(super) fn check_one_reassertion(&self, before: &[u64]) {
        for (c, b) in before.iter().enumerate() {
            assert!(
                self.reasserts(c) <= b + 1,
                "client {c} re-asserted more than once"
            );
        }
    }

    /// An overload move of a client moved less than the hold-down ago never happens, whatever
    /// asked for it.
    pub(super) fn check_hold_down(&self, before: &HashMap<ClientKey, u64>) {
        let hold = self.s.cfg.policy.hold_down * 1000;
        for (c, m) in &self.s.moved {
            if m.at_ms != self.now || !matches!(m.reason, Reason::Overload | Reason::Room) {
                continue;
            }
            if let Some(prev) = before.get(c).filter(|t| **t != self.now) {
                assert!(
                    self.now - prev >= hold,
                    "{c} moved again after {} ms",
                    self.now - prev
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_core_keeps_its_rules_under_any_events(ops in proptest::collection::vec(op(), 1..120)) {
        let mut h = Harness::new();
        for op in ops {
            h.apply(op);
        }
        // Time runs on: whatever is queued drains, within the limits, and the heap empties.
        h.advance(10_000);
        prop_assert!(h.s.next_due().is_none());
    }

    #[test]
    fn a_burst_of_one_frame_gives_one_re_assertion(n in 1usize..50, c in 0..CLIENTS) {
        let mut h = Harness::new();
        h.apply(Op::Move { c, to: 1, failover: false, v6: true });
        h.apply(Op::Advance(2000));
        h.apply(Op::HostReply { c, p: 0, n });
        prop_assert_eq!(h.reasserts(c), 1);
        h.apply(Op::Advance(2000));
        let sent = h.sends[&key(c)].iter().filter(|t| **t >= 2000).count();
        // One re-assertion: ARP and NA, now and one repeat.
        prop_assert_eq!(sent, 4);
    }
}
