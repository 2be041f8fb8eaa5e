//! What the engine says of the daemon's life: that it started (the server's interfaces, a bond
//! still without slaves), that it stops (on which signal), and the whole state on demand
//! (SIGUSR1), with the capture sockets' own figures the shell hands in.

use log::Level;

use super::io::Topic;
use super::report::{self, CaptureFacts};
use super::Engine;
use crate::config::Target;
use crate::status::StatusReport;

impl Engine {
    /// The shell is up (its sockets open, the start-up checks passed, an earlier daemon's
    /// state taken over): what it steers, and the summary it is ready with.
    pub(super) fn started(&mut self, now: u64) {
        // At boot the bond's device appears before the network manager enslaves its slaves
        // (systemd-networkd does it moments later): they are waited for, as for a bond that
        // returns.
        if let Target::Bond(name) = &self.lan.ports.target {
            if let Some(mode) = self.lan.ports.bond_mode {
                let text = format!("bond {name}: mode {mode}");
                self.out.log(Level::Info, Topic::Port, text);
            }
            if !self.lan.ports.list.iter().any(|p| p.present) {
                let text = format!("bond {name} has no slaves yet; waiting for them");
                self.out.log(Level::Info, Topic::Port, text);
            }
        }
        let text = format!("the server's interfaces: {}", self.shape().join(", "));
        self.out.log(Level::Info, Topic::Host, text);
        let summary = report::status(self, now, Some(0)).summary();
        self.out.log(Level::Info, Topic::State, summary);
    }

    /// The daemon exits on `signal`.
    pub(super) fn stopping(&mut self, signal: i32) {
        let text = format!("signal {signal}: exiting");
        self.out.log(Level::Info, Topic::State, text);
    }

    /// The whole state into the log (every client), each port with its capture's figures.
    pub(super) fn dump_state(&mut self, now: u64, captures: &[CaptureFacts]) {
        let mut r = report::status(self, now, None);
        for (p, f) in r.ports.iter_mut().zip(captures) {
            f.fill(p);
        }
        for text in state_lines(&r) {
            self.out.log(Level::Info, Topic::State, text);
        }
    }
}

/// The state as log lines: the summary, each port, each client, the totals.
fn state_lines(r: &StatusReport) -> Vec<String> {
    let mut lines = vec![format!("state: {}", r.summary())];
    for p in &r.ports {
        lines.push(format!(
            "  port {} ifindex {} mac {} {} capacity {:.0} Mbit/s rx {} window {} ring drops {} \
             counting {} sampling 1/{} uncounted {}",
            p.name,
            p.ifindex,
            p.mac,
            p.state.as_str(),
            p.capacity_bps / 1e6,
            p.rx_bps
                .map_or("-".into(), |r| format!("{:.1} Mbit/s", r / 1e6)),
            p.window,
            p.ring_drops,
            p.counting.as_str(),
            p.sampling,
            p.uncounted_frames
        ));
    }
    for c in &r.clients {
        let moved = c.moved.as_ref().map_or(String::new(), |m| {
            format!(
                ", moved {}s ago ({}), re-asserted {}x",
                m.secs_ago,
                m.reason.as_str(),
                m.reasserts
            )
        });
        lines.push(format!(
            "  client {} {} on {} {:.2} Mbit/s{moved}",
            c.ip,
            c.mac,
            c.port,
            c.rate_bps / 1e6
        ));
    }
    let t = &r.totals;
    lines.push(format!(
        "  totals: moves {}, re-assertions {}, updates sent {}, suppressed {}, table evictions {}",
        t.moves_by_reason(),
        t.reasserts,
        t.updates_sent,
        t.updates_suppressed,
        t.table_evictions
    ));
    lines
}
