//! The words of a move's log line: who, from and to where, the rate, both ports' utilization
//! before and after, why, and every address claimed.

use super::{ClientKey, Ctx};
use crate::host::Claim;
use crate::logging::{Fields, MessageId};
use crate::policy::Move;

/// Why a settling move is made, for its log line: the first half of an exchange or a move on
/// (`from` is over-full), the second half (`partner`, a smaller client of a port with room
/// going in the larger one's place), or room gathered on `from`.
pub(super) fn settle_line(mv: &Move, partner: bool, ctx: &Ctx) -> String {
    let (from, to) = (ctx.port_name(mv.from), ctx.port_name(mv.to));
    if mv.gathers {
        format!("settle: {from} keeps its room in one piece for a client of a saturated port")
    } else if partner {
        format!("settle: exchanged for a larger client of the over-full {to}")
    } else if mv.exchange {
        format!("settle: {from} is over-full since this client's move; exchanged with a smaller client of {to}")
    } else {
        format!("settle: {from} is over-full since this client's move; {to} has room for it")
    }
}

/// The log line of a move: who, from and to where, the rate and both ports' utilization before
/// and after, why, and every address claimed.
pub(super) fn move_line(
    dry_run: bool,
    client: ClientKey,
    claims: &[Claim],
    mv: &Move,
    why: &str,
    ctx: &Ctx,
) -> String {
    let also: String = claims
        .iter()
        .skip(1)
        .map(|c| format!(" and {} -> {}", c.client(), c.server()))
        .collect();
    let (from, to) = (ctx.port_name(mv.from), ctx.port_name(mv.to));
    format!(
        "{}move {} ({client}) {from} -> {to}: {:.1} Mbit/s; {from} {:.2}->{:.2}, {to} {:.2}->{:.2}; {why}{}",
        if dry_run { "dry run: would " } else { "" },
        claims.first().map_or_else(String::new, |c| c.client().to_string()),
        mv.rate_bps / 1e6,
        mv.from_util.0,
        mv.from_util.1,
        mv.to_util.0,
        mv.to_util.1,
        if also.is_empty() { String::new() } else { format!("; claims{also}") },
    )
}

/// The fields of a move's record: the same facts as its line, as data.
pub(super) fn move_fields(
    dry_run: bool,
    client: ClientKey,
    claims: &[Claim],
    mv: &Move,
    ctx: &Ctx,
) -> Fields {
    Fields {
        id: Some(MessageId::Move),
        port: Some(ctx.port_name(mv.to).to_string()),
        from_port: Some(ctx.port_name(mv.from).to_string()),
        client: claims.first().map(Claim::client),
        client_mac: Some(client.mac),
        vlan: client.vlan,
        reason: Some(mv.reason.as_str()),
        dry_run,
    }
}
