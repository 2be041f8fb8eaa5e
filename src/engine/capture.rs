//! The capture path through the door: a port's socket opened, its counting program attached
//! (or refused), the frames a drain handed over, the port's packet counter and the second's
//! facts, turned into the counting's decisions ([`super::counting`]) and, once a port's
//! counting is settled, its part of the guest path.

use super::io::{CountingHook, HookFacts, Output, PortId, PortSecond};
use super::Engine;
use crate::netlink::NlEvent;

impl Engine {
    /// Port `port`'s capture socket is open (or is not): its capacity, and its counting.
    pub(super) fn capture_opened(
        &mut self,
        port: PortId,
        speed_mbps: Option<u64>,
        error: Option<String>,
    ) {
        let Some(r) = self.lan.port_ref(port.index()) else {
            return;
        };
        let ok = error.is_none();
        self.lan
            .capture_opened(port.index(), speed_mbps, error, &mut self.out);
        if self.counting.opened(&r, ok, &mut self.out) && ok {
            self.guest_port(port.index());
        }
    }

    /// What became of a counting program's attachment: settled, or the next hook to try.
    pub(super) fn hook_attached(
        &mut self,
        port: PortId,
        hook: CountingHook,
        result: Result<HookFacts, String>,
    ) {
        let Some(r) = self.lan.port_ref(port.index()) else {
            return;
        };
        if self.counting.hook_attached(&r, hook, result, &mut self.out) {
            self.guest_port(port.index());
        }
    }

    /// A drain of `port`'s ring handed over `frames`.
    pub(super) fn drained(&mut self, now: u64, port: PortId, frames: usize) {
        if let Some(r) = self.lan.port_ref(port.index()) {
            self.counting.drained(&r, now, frames, &mut self.out);
        }
    }

    /// The ports' receive packet counters of a netlink batch, to their samplers.
    pub(super) fn counters_to_samplers(&mut self, now: u64, events: &[NlEvent]) {
        for ev in events {
            let NlEvent::Link(l) = ev else {
                continue;
            };
            let ports = &self.lan.ports;
            let (Some(i), Some(pk)) = (ports.by_ifindex(l.index), l.rx_packets) else {
                continue;
            };
            if let Some(r) = self.lan.port_ref(i) {
                self.counting.on_counter(&r, now, pk, &mut self.out);
            }
        }
    }

    /// The second's capture facts: each port's ratio and the packets its program saw (for the
    /// planner's resolution), and whether the second's client rates are whole and undropped.
    pub(super) fn capture_second(&mut self, now: u64, facts: &[PortSecond]) -> (bool, bool) {
        let (lan, out) = (&self.lan, &mut self.out);
        let verdict = self.counting.second(now, facts, lan.refs(), out);
        for (i, p) in self.lan.ports.list.iter_mut().enumerate() {
            let seen = facts.get(i).and_then(|f| f.hook_packets);
            let seen = seen.filter(|_| self.counting.hook(i).is_some());
            p.record_sampling(now, self.counting.ratio(i), seen);
        }
        verdict
    }

    /// Port `i`'s part of the guest path, once its counting is settled (the guest program
    /// follows the counting one at the tc hook), while guests are balanced.
    fn guest_port(&mut self, i: usize) {
        if !self.guest_path {
            return;
        }
        if let Some(port) = self.lan.port_ref(i) {
            self.out.push(Output::GuestPort { port });
        }
    }

    /// The guest path just went on: every port whose counting is settled gets its part.
    pub(super) fn guest_ports(&mut self) {
        for i in 0..self.lan.ports.list.len() {
            let present = self.lan.ports.list[i].present;
            if present && self.counting.settled(i) {
                self.guest_port(i);
            }
        }
    }

    /// A port's socket closed.
    pub(super) fn capture_closed(&mut self, i: usize) {
        self.counting.closed(i);
    }
}
