//! The steering core's decisions turned into outputs, and what became of each frame: a frame
//! sent confirms its move; one refused for a passing reason is tried again with a growing delay
//! ([`retry`](super::retry)); one refused for good (or superseded by a newer update to the same
//! client) counts against its move, which the core undoes when none of its frames went out.

use std::net::IpAddr;

use log::Level;

use super::retry::Update;
use super::{Engine, Output, Topic};
use crate::client::ClientKey;
use crate::steer::{Action, SendOutcome};

/// What a frame the engine asked to send was for; it comes back with the frame's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendTag {
    /// An update telling `client` (at address `to`) to use `port`, for the core's move
    /// `move_id`; `tries` counts this one (1 for the first).
    Update {
        port: usize,
        client: ClientKey,
        to: IpAddr,
        move_id: u64,
        tries: usize,
    },
    /// A frame that keeps the switch's MAC table pointing at `port` (plain ports).
    Learning { port: usize },
}

impl Engine {
    /// Turns the steering core's actions into outputs (reusing the action buffer).
    pub(super) fn carry_out(&mut self, now: u64) {
        let mut actions = std::mem::take(&mut self.actions);
        for a in actions.drain(..) {
            match a {
                Action::Send {
                    port,
                    client,
                    claim,
                    frame,
                    move_id,
                } => {
                    // A newer frame for this client voids its older retries (a later decision
                    // must never be overwritten by an earlier one).
                    for id in self.trouble.retries.supersede(client) {
                        self.outcome(now, client, id, SendOutcome::Refused);
                    }
                    let tag = SendTag::Update {
                        port,
                        client,
                        to: claim.client(),
                        move_id,
                        tries: 1,
                    };
                    self.out.push_back(Output::Send { port, tag, frame });
                }
                Action::Log(level, text) => self.log(level, Topic::Steer, text),
            }
        }
        // Kept (empty) for the next call: no allocation per batch.
        self.actions = actions;
    }

    /// Tells the steering core what became of one frame of move `move_id` (it may undo a move
    /// none of whose frames went out, and say so).
    fn outcome(&mut self, now: u64, client: ClientKey, move_id: u64, o: SendOutcome) {
        self.steer_with(now, |s, now, ctx, out| {
            s.on_send_result(now, client, move_id, o, ctx, out)
        });
        self.dirty = true;
    }

    pub(super) fn on_send_result(
        &mut self,
        now: u64,
        tag: SendTag,
        frame: Vec<u8>,
        result: Result<(), Option<i32>>,
    ) {
        let SendTag::Update {
            port,
            client,
            to,
            move_id,
            tries,
        } = tag
        else {
            if let (SendTag::Learning { port }, Err(Some(errno))) = (tag, result) {
                let name = self.port_name(port);
                let e = std::io::Error::from_raw_os_error(errno);
                self.log(
                    Level::Debug,
                    Topic::Send,
                    format!("port {name}: learning frame not sent: {e}"),
                );
            }
            return;
        };
        let errno = match result {
            Ok(()) => return self.outcome(now, client, move_id, SendOutcome::Sent),
            // No socket: the port is gone.
            Err(None) => return self.outcome(now, client, move_id, SendOutcome::Refused),
            Err(Some(errno)) => errno,
        };
        let update = Update {
            port,
            client,
            move_id,
            frame,
        };
        let refusal = self.trouble.retries.failed(now, update, tries, Some(errno));
        let name = self.port_name(port);
        let e = std::io::Error::from_raw_os_error(errno);
        let what = if tries > 1 {
            format!("the retried update to {client}")
        } else {
            format!("the update to {to} ({client})")
        };
        let (level, text) = match refusal.warn {
            Some(n) if n > 1 => (
                Level::Warn,
                format!(
                    "port {name}: cannot send {what}: {e} ({} more refused since the last warning)",
                    n - 1
                ),
            ),
            Some(_) => (Level::Warn, format!("port {name}: cannot send {what}: {e}")),
            None => (
                Level::Debug,
                format!("port {name}: cannot send {what}: {e}"),
            ),
        };
        self.log(level, Topic::Send, text);
        if !refusal.retrying {
            self.outcome(now, client, move_id, SendOutcome::Refused);
        }
    }

    /// Refused frames whose retry is due, on ports still usable (a port that went down is the
    /// failover's business: its frames are refused for good).
    pub(super) fn retry_sends(&mut self, now: u64) {
        for p in self.trouble.retries.due(now) {
            let Update {
                port,
                client,
                move_id,
                frame,
            } = p.update;
            if !self.ports.list.get(port).is_some_and(|x| x.usable()) {
                self.outcome(now, client, move_id, SendOutcome::Refused);
                continue;
            }
            let tag = SendTag::Update {
                port,
                client,
                to: IpAddr::from([0, 0, 0, 0]),
                move_id,
                tries: p.tries + 1,
            };
            self.out.push_back(Output::Send { port, tag, frame });
        }
    }

    /// Plain ports: keeps the switch's MAC table pointing at every port (a port that only
    /// receives would be forgotten by the switch and flooded).
    pub(super) fn send_learning_frames(&mut self) {
        for (port, p) in self.ports.list.iter().enumerate() {
            if p.usable() {
                self.out.push_back(Output::Send {
                    port,
                    tag: SendTag::Learning { port },
                    frame: crate::steer::learning_frame(p.mac).to_vec(),
                });
            }
        }
    }

    pub(super) fn port_name(&self, port: usize) -> String {
        self.ports
            .list
            .get(port)
            .map_or_else(|| "?".into(), |p| p.name.clone())
    }
}
