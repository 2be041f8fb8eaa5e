//! What became of each frame the engine asked to send: one sent confirms its move; one refused
//! for a passing reason is tried again with a growing delay ([`Retries`]); one refused for good
//! (or superseded by a newer update to the same client) counts against its move, which the
//! steering core undoes when none of its frames went out. Also the learning frames of plain
//! ports.

use std::net::IpAddr;

use log::Level;

use super::io::{Output, SendTag, Topic};
use super::lan::Lan;
use super::outbox::Outbox;
use super::retry::{Retries, Update};
use crate::client::ClientKey;
use crate::steer::SendOutcome;

/// A frame's outcome for the steering core: (client, move, outcome).
pub type Outcome = (ClientKey, u64, SendOutcome);

#[derive(Debug, Default)]
pub struct Sender {
    retries: Retries,
}

impl Sender {
    /// An update of move `move_id` to `client` (at `to`) goes out of `port`: older retries of
    /// the client's are void (a later decision must never be overwritten by an earlier one),
    /// each an outcome for the core.
    pub fn send(
        &mut self,
        update: (usize, ClientKey, IpAddr, u64),
        frame: Vec<u8>,
        (lan, out): (&Lan, &mut Outbox),
        outcomes: &mut Vec<Outcome>,
    ) {
        let (port, client, to, move_id) = update;
        for id in self.retries.supersede(client) {
            outcomes.push((client, id, SendOutcome::Refused));
        }
        let Some(port) = lan.port_ref(port) else {
            // No such port: nothing can go out of it.
            outcomes.push((client, move_id, SendOutcome::Refused));
            return;
        };
        let tag = SendTag::Update {
            port: port.id,
            client,
            to,
            move_id,
            tries: 1,
        };
        out.push(Output::Send { port, tag, frame });
    }

    /// What the kernel said of a frame: the outcome for the core, unless a retry is queued.
    pub fn result(
        &mut self,
        now: u64,
        (tag, frame): (SendTag, Vec<u8>),
        result: Result<(), Option<i32>>,
        lan: &Lan,
        out: &mut Outbox,
    ) -> Option<Outcome> {
        let SendTag::Update {
            port,
            client,
            to,
            move_id,
            tries,
        } = tag
        else {
            if let (SendTag::Learning { port }, Err(Some(errno))) = (tag, result) {
                let e = std::io::Error::from_raw_os_error(errno);
                let name = lan.port_name(port.index());
                let text = format!("port {name}: learning frame not sent: {e}");
                out.log(Level::Debug, Topic::Send, text);
            }
            if let (SendTag::Announce { port, guest }, Err(errno)) = (tag, result) {
                let e = errno.map_or_else(
                    || "the port has no socket".to_string(),
                    |n| std::io::Error::from_raw_os_error(n).to_string(),
                );
                let text = format!(
                    "port {}: guest {guest}'s announcement not sent: {e}",
                    lan.port_name(port.index())
                );
                out.log(Level::Warn, Topic::Send, text);
            }
            return None;
        };
        let errno = match result {
            Ok(()) => return Some((client, move_id, SendOutcome::Sent)),
            // No socket: the port is gone.
            Err(None) => return Some((client, move_id, SendOutcome::Refused)),
            Err(Some(errno)) => errno,
        };
        let update = Update {
            port: port.index(),
            client,
            to,
            move_id,
            frame,
        };
        let refusal = self.retries.failed(now, update, tries, Some(errno));
        let e = std::io::Error::from_raw_os_error(errno);
        let what = if tries > 1 {
            format!("the retried update to {client}")
        } else {
            format!("the update to {to} ({client})")
        };
        let text = format!(
            "port {}: cannot send {what}: {e}",
            lan.port_name(port.index())
        );
        let (level, text) = match refusal.warn {
            Some(n) if n > 1 => (
                Level::Warn,
                format!("{text} ({} more refused since the last warning)", n - 1),
            ),
            Some(_) => (Level::Warn, text),
            None => (Level::Debug, text),
        };
        out.log(level, Topic::Send, text);
        (!refusal.retrying).then_some((client, move_id, SendOutcome::Refused))
    }

    /// Refused frames whose retry is due go out again, on ports still usable (a port that went
    /// down is the failover's business: its frames are refused for good, as outcomes).
    pub fn retry_due(
        &mut self,
        now: u64,
        lan: &Lan,
        out: &mut Outbox,
        outcomes: &mut Vec<Outcome>,
    ) {
        for p in self.retries.due(now) {
            let Update {
                port,
                client,
                to,
                move_id,
                frame,
            } = p.update;
            // The rule of every send holds for a retry too: only to a client the kernel still
            // confirms (found by the simulation, seed 4: a retry 50 ms after the first try went
            // to a client whose neighbour entry had gone meanwhile).
            // Nor with a MAC the port no longer has (balance-alb swapped it away, maybe to a
            // dead slave; found by the simulation, seed 11): the MAC change's own re-assertion
            // tells the client the new one.
            let usable = lan
                .ports
                .list
                .get(port)
                .is_some_and(|x| x.usable() && frame.get(6..12) == Some(&x.mac.octets()[..]));
            let port = lan.port_ref(port).filter(|_| usable);
            let Some(port) = port.filter(|_| lan.host.confirms(client, to)) else {
                outcomes.push((client, move_id, SendOutcome::Refused));
                continue;
            };
            let tag = SendTag::Update {
                port: port.id,
                client,
                to,
                move_id,
                tries: p.tries + 1,
            };
            out.push(Output::Send { port, tag, frame });
        }
    }

    /// Plain ports: keeps the switch's MAC table pointing at every port (a port that only
    /// receives would be forgotten by the switch and flooded).
    pub fn learning_frames(lan: &Lan, out: &mut Outbox) {
        for (r, p) in lan.refs().iter().zip(&lan.ports.list) {
            if p.usable() {
                out.push(Output::Send {
                    port: r.clone(),
                    tag: SendTag::Learning { port: r.id },
                    frame: crate::steer::learning_frame(p.mac).to_vec(),
                });
            }
        }
    }

    pub fn next_due(&self) -> Option<u64> {
        self.retries.next_due()
    }

    /// Refusals since start (first tries and retries).
    pub fn errors(&self) -> u64 {
        self.retries.errors()
    }

    /// Retries made.
    pub fn retried(&self) -> u64 {
        self.retries.retried()
    }
}
