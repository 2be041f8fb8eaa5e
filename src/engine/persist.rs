//! The durable state, as the state file holds it (`/run/rlbd/NAME.state`): the steering core's
//! moves with their hold-downs and claims, refused moves' backoff, whom the host answered where,
//! and the per-client budgets, with ports named (a restarted daemon may number them otherwise)
//! and times on the system's monotonic clock (the same in every process until a reboot, which
//! also empties `/run`). The shell writes it atomically when the engine hands it out, at most
//! once a second; at start the engine takes it back when it is this bond's or these ports',
//! and younger than the hold-down.

use log::Level;
use serde::{Deserialize, Serialize};

use super::{Engine, Output, Topic};
use crate::client::ClientKey;
use crate::config::Target;
use crate::host::Claim;
use crate::policy::Reason;
use crate::steer::{DurableMove, Rule, SteerState};
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

impl Engine {
    /// Hands the durable state out when it changed, at most once a second.
    pub(super) fn maybe_persist(&mut self, now: u64) {
        let off = self.rules_off.has(Rule::StateFile);
        if off || !self.dirty || now < self.schedule.next_persist || self.settings.dry_run {
            return;
        }
        self.dirty = false;
        self.schedule.next_persist = now + 1000;
        let p = self.persisted(now);
        self.out.push_back(Output::Persist(Box::new(p)));
    }

    fn persisted(&self, now: u64) -> Persisted {
        let s = self.steer.export(now);
        let name = |p: usize| self.ports.list.get(p).map(|p| p.name.clone());
        let names = |mask: u64| -> Vec<String> {
            (0..64)
                .filter(|b| mask & (1 << b) != 0)
                .filter_map(name)
                .collect()
        };
        Persisted {
            version: STATE_VERSION,
            target: target_name(&self.ports.target),
            written_ms: now,
            moves: s
                .moves
                .into_iter()
                .filter_map(|m| {
                    Some(PersistedMove {
                        mac: m.client.mac.to_string(),
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
                    mac: k.mac.to_string(),
                    vlan: k.vlan,
                    until_ms,
                    in_a_row,
                })
                .collect(),
            answered: s
                .answered
                .into_iter()
                .map(|(k, mask, claims)| PersistedAnswer {
                    mac: k.mac.to_string(),
                    vlan: k.vlan,
                    ports: names(mask),
                    claims,
                })
                .collect(),
            budgets: s
                .budgets
                .into_iter()
                .map(|(m, tokens)| PersistedBudget {
                    mac: m.to_string(),
                    tokens,
                })
                .collect(),
        }
    }

    /// Why an earlier daemon's state does not belong to this one, if it does not.
    fn foreign_state(&self, now: u64, p: &Persisted) -> Option<String> {
        if self.rules_off.has(Rule::StateFile) {
            return Some("the state file is switched off (a mutation run)".into());
        }
        let hold = self.settings.policy.hold_down.saturating_mul(1000);
        let ours = target_name(&self.ports.target);
        if p.version != STATE_VERSION {
            Some(format!(
                "version {} (this rlbd writes {STATE_VERSION})",
                p.version
            ))
        } else if p.target != ours {
            Some(format!("it is the state of {}, not of {ours}", p.target))
        } else if p.written_ms > now {
            Some("it was written after now (another boot's?)".into())
        } else if now - p.written_ms >= hold {
            Some(format!(
                "it is {} s old, older than the hold-down ({} s)",
                (now - p.written_ms) / 1000,
                hold / 1000
            ))
        } else {
            None
        }
    }

    /// Takes an earlier daemon's state back (at start, after the first view of the host).
    pub(super) fn restore(&mut self, now: u64, p: Persisted, file: &str) {
        if let Some(why) = self.foreign_state(now, &p) {
            self.log(
                Level::Warn,
                Topic::Restore,
                format!("state file {file} ignored: {why}"),
            );
            return;
        }
        let port = |name: &str| self.ports.list.iter().position(|p| p.name == name);
        let mask = |names: &[String]| {
            names
                .iter()
                .filter_map(|n| port(n))
                .filter(|i| *i < 64)
                .fold(0u64, |m, i| m | (1 << i))
        };
        let state = SteerState {
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
        };
        let (moves, answered) = (state.moves.len(), state.answered.len());
        let usable: Vec<bool> = self.ports.list.iter().map(|p| p.usable()).collect();
        self.steer
            .import(now, state, |p| usable.get(p).copied().unwrap_or(false));
        self.log(
            Level::Info,
            Topic::Restore,
            format!(
                "state file {file}: {moves} moves taken over (re-asserted, their hold-downs kept), \
                 {answered} answered clients; written {} ms ago",
                now - p.written_ms
            ),
        );
        self.carry_out(now);
        self.steer_with(now, |s, now, ctx, out| s.on_timer(now, ctx, out));
        // Moves onto a port that failed while no daemon watched: fail them over now.
        let down: Vec<usize> = (0..usable.len()).filter(|i| !usable[*i]).collect();
        if !down.is_empty() {
            self.client_snaps(false);
            let clients = std::mem::take(&mut self.snaps);
            let views = self.ports.views();
            self.steer_with(now, |s, now, ctx, out| {
                s.failover(now, &down, &views, &clients, ctx, out)
            });
            self.snaps = clients;
        }
        self.dirty = true;
    }
}
