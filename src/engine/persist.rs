//! The durable state, as the state file holds it (`/run/rlbd/NAME.state`): the steering core's
//! moves with their hold-downs and claims, refused moves' backoff, whom the host answered where,
//! and the per-client budgets, with ports named (a restarted daemon may number them otherwise)
//! and times on the system's monotonic clock (the same in every process until a reboot, which
//! also empties `/run`). The shell writes it atomically when the engine hands it out, at most
//! once a second; at start the engine takes it back when it is this bond's or these ports',
//! and younger than the hold-down.

use serde::{Deserialize, Serialize};

use super::lan::Lan;
use crate::client::{mac_text, ClientKey};
use crate::config::Target;
use crate::guests::GuestPin;
use crate::host::Claim;
use crate::policy::Reason;
use crate::steer::{DurableMove, SteerState};
use crate::Mac;

/// The state file's format; a file of another version is ignored.
pub const STATE_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Persisted {
    pub version: u32,
    /// "bond NAME" or "ports A,B": whose state this is.
    pub target: String,
    /// When it was written, ms on the monotonic clock.
    pub written_ms: u64,
    pub moves: Vec<PersistedMove>,
    pub refused: Vec<PersistedRefusal>,
    pub answered: Vec<PersistedAnswer>,
    pub budgets: Vec<PersistedBudget>,
    /// The guests' pins (`[guests]`). Absent when there are none, so a host without guests
    /// writes the file an earlier release reads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guests: Vec<PersistedGuest>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersistedGuest {
    pub mac: String,
    pub vlan: u16,
    pub port: String,
    /// Its last move: when, from which port, why.
    #[serde(default)]
    pub moved_ms: Option<u64>,
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub reason: Option<Reason>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersistedMove {
    pub mac: String,
    pub vlan: u16,
    pub port: String,
    pub claims: Vec<Claim>,
    pub at_ms: u64,
    pub reason: Reason,
    pub reasserts: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersistedRefusal {
    pub mac: String,
    pub vlan: u16,
    pub until_ms: u64,
    pub in_a_row: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersistedAnswer {
    pub mac: String,
    pub vlan: u16,
    pub ports: Vec<String>,
    pub claims: Vec<Claim>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersistedBudget {
    pub mac: String,
    pub tokens: f64,
}

/// How a target is named in the state file.
pub fn target_name(t: &Target) -> String {
    match t {
        Target::Bond(b) => format!("bond {b}"),
        Target::Ports(p) => format!("ports {}", p.join(",")),
    }
}

fn key(mac: &str, vlan: u16) -> Option<ClientKey> {
    Some(ClientKey::new(mac.parse::<Mac>().ok()?, vlan))
}

/// When the durable state is handed out: when it changed, at most once a second, and never
/// before the first second has passed. A daemon starting up has not yet taken an earlier one's
/// state over (the shell reads the file after the first view of the host, which may already
/// change something durable, a port found down): handing its empty state out then would
/// overwrite the file it is about to read.
#[derive(Debug, Default)]
pub struct Durable {
    /// Changed since it was last handed out.
    pub dirty: bool,
    /// The first second has passed.
    pub started: bool,
    next: u64,
}

impl Durable {
    /// Whether to hand it out now (then not again for a second).
    pub fn due(&mut self, now: u64) -> bool {
        if !self.started || !self.dirty || now < self.next {
            return false;
        }
        self.dirty = false;
        self.next = now + 1000;
        true
    }

    /// When it will be due, if it changed.
    pub fn deadline(&self) -> Option<u64> {
        (self.started && self.dirty).then_some(self.next)
    }
}

/// The steering core's state as the file holds it: ports by name.
pub fn to_file(s: SteerState, lan: &Lan, now: u64) -> Persisted {
    let name = |p: usize| lan.ports.list.get(p).map(|p| p.name.clone());
    let names = |mask: u64| -> Vec<String> {
        (0..64)
            .filter(|b| mask & (1 << b) != 0)
            .filter_map(name)
            .collect()
    };
    Persisted {
        version: STATE_VERSION,
        target: target_name(&lan.ports.target),
        written_ms: now,
        moves: s
            .moves
            .into_iter()
            .filter_map(|m| {
                Some(PersistedMove {
                    mac: mac_text(m.client.mac),
                    vlan: m.client.vlan,
                    port: name(m.port)?,
                    claims: m.claims,
                    at_ms: m.at_ms,
                    reason: m.reason,
                    reasserts: m.reasserts,
                })
            })
            .collect(),
        refused: s
            .refused
            .into_iter()
            .map(|(k, until_ms, in_a_row)| PersistedRefusal {
                mac: mac_text(k.mac),
                vlan: k.vlan,
                until_ms,
                in_a_row,
            })
            .collect(),
        answered: s
            .answered
            .into_iter()
            .map(|(k, mask, claims)| PersistedAnswer {
                mac: mac_text(k.mac),
                vlan: k.vlan,
                ports: names(mask),
                claims,
            })
            .collect(),
        budgets: s
            .budgets
            .into_iter()
            .map(|(m, tokens)| PersistedBudget {
                mac: mac_text(m),
                tokens,
            })
            .collect(),
        guests: Vec::new(),
    }
}

/// The guests' pins as the file holds them: ports by name.
pub fn guests_to_file(pins: Vec<GuestPin>, lan: &Lan) -> Vec<PersistedGuest> {
    let name = |p: usize| lan.ports.list.get(p).map(|p| p.name.clone());
    pins.into_iter()
        .filter_map(|g| {
            Some(PersistedGuest {
                mac: mac_text(g.key.mac),
                vlan: g.key.vlan,
                port: name(g.port)?,
                moved_ms: g.moved_ms,
                from: g.last_move.and_then(|(p, _)| name(p)),
                reason: g.last_move.map(|(_, r)| r),
            })
        })
        .collect()
}

/// The file's guests' pins: ports by this daemon's numbers (what names no port now is dropped).
pub fn guests_from_file(p: &Persisted, lan: &Lan) -> Vec<GuestPin> {
    let port = |name: &str| lan.ports.list.iter().position(|p| p.name == name);
    p.guests
        .iter()
        .filter_map(|g| {
            let from = g.from.as_deref().and_then(port);
            Some(GuestPin {
                key: key(&g.mac, g.vlan)?,
                port: port(&g.port)?,
                moved_ms: g.moved_ms,
                last_move: from.zip(g.reason),
            })
        })
        .collect()
}

/// Why an earlier daemon's state does not belong to this one (`target`, at `now`, with a
/// hold-down of `hold_ms`), if it does not.
pub fn foreign(p: &Persisted, target: &Target, hold_ms: u64, now: u64) -> Option<String> {
    let ours = target_name(target);
    if p.version != STATE_VERSION {
        Some(format!(
            "version {} (this rlbd writes {STATE_VERSION})",
            p.version
        ))
    } else if p.target != ours {
        Some(format!("it is the state of {}, not of {ours}", p.target))
    } else if p.written_ms > now {
        Some("it was written after now (another boot's?)".into())
    } else if now - p.written_ms >= hold_ms {
        Some(format!(
            "it is {} s old, older than the hold-down ({} s)",
            (now - p.written_ms) / 1000,
            hold_ms / 1000
        ))
    } else {
        None
    }
}

/// The file's state for the steering core: ports by this daemon's numbers (what names no port
/// now is dropped).
pub fn from_file(p: &Persisted, lan: &Lan) -> SteerState {
    let port = |name: &str| lan.ports.list.iter().position(|p| p.name == name);
    let mask = |names: &[String]| {
        names
            .iter()
            .filter_map(|n| port(n))
            .filter(|i| *i < 64)
            .fold(0u64, |m, i| m | (1 << i))
    };
    SteerState {
        moves: p
            .moves
            .iter()
            .filter_map(|m| {
                Some(DurableMove {
                    client: key(&m.mac, m.vlan)?,
                    port: port(&m.port)?,
                    claims: m.claims.clone(),
                    at_ms: m.at_ms,
                    reason: m.reason,
                    reasserts: m.reasserts,
                })
            })
            .collect(),
        refused: p
            .refused
            .iter()
            .filter_map(|r| Some((key(&r.mac, r.vlan)?, r.until_ms, r.in_a_row)))
            .collect(),
        answered: p
            .answered
            .iter()
            .filter_map(|a| Some((key(&a.mac, a.vlan)?, mask(&a.ports), a.claims.clone())))
            .filter(|(_, m, _)| *m != 0)
            .collect(),
        budgets: p
            .budgets
            .iter()
            .filter_map(|b| Some((b.mac.parse::<Mac>().ok()?, b.tokens)))
            .collect(),
    }
}
