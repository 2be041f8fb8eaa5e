//! What the steering core does about frames seen on the wire: a frame that undoes a move (or is
//! about to) is answered with a re-assertion, one for a burst; the host's own answers are noted
//! for plain ports' failover; a port whose MAC changed has its clients re-asserted.

use log::Level;

use super::{log, Action, Ctx, LogKind, PortIndex, Rule, Steerer, Weakening};
use crate::capture::NdKind;
use crate::client::ClientKey;
use crate::host::Claim;
use crate::logging::Fields;
use crate::policy::reassert::{at_risk, nd_at_risk, ArpSeen, NdSeen, ARP_REPLY, ARP_REQUEST};

/// Linux's ARP locktime (`locktime`, 1 s): within it after an entry changed, a plain reply
/// does not change it again.
const LOCKTIME_MS: u64 = 1_000;

/// The MAC a host's frame told its hearers, and whether the hearer's locktime applies to it.
#[derive(Debug, Clone, Copy)]
struct Told {
    mac: Mac,
    locked: bool,
}
use crate::Mac;

/// How long a MAC a port gave up waits for the port that takes it: balance-alb's swap sets both
/// MACs at once, so the second change is at most a read of the netlink socket behind.
pub const SWAP_WINDOW_MS: u64 = 5_000;

impl Steerer {
    /// Queues the update again for a moved client whose move something on the wire undid or is
    /// about to undo. Several frames in a burst share one re-assertion: a send already due as
    /// soon as this one would be covers them all.
    pub(super) fn reassert(
        &mut self,
        now: u64,
        client: ClientKey,
        why: &str,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        let due = now + self.cfg.reassert_delay_ms;
        // Claims told before its turn came are undone too: its next send tells every claim.
        if let Some(k) = self.unheard.get_mut(&client) {
            *k = 0;
        }
        let Some(m) = self.moved.get_mut(&client) else {
            return;
        };
        let off = self.cfg.rules_off.has(Rule::Reassertion)
            || (client.vlan != 0 && self.cfg.rules_off.weakened(Weakening::ReassertionSkipsVlan));
        if off || m.pending.iter().any(|t| *t <= due) {
            return;
        }
        m.reasserts += 1;
        self.counters.reasserts += 1;
        let ip = m.client_ip();
        let what = ip.map_or_else(|| client.to_string(), |ip| ip.to_string());
        let port = ctx.port_name(m.port);
        let fields = Fields {
            port: Some(port.to_string()),
            client: ip,
            client_mac: Some(client.mac),
            vlan: client.vlan,
            reason: Some("reassert"),
            ..Fields::default()
        };
        let text = format!("re-asserting {what} on {port}: {why}");
        out.push(Action::Log(Level::Debug, LogKind::Steer, text, fields));
        // Once now, once a repeat later: the kernel or the driver may send more than one frame.
        self.schedule(client, due, 2, out);
    }

    /// The MAC of the port rlbd put `client` on; `None` for a client it did not move.
    fn assigned_mac(&self, client: &ClientKey, ctx: &Ctx) -> Option<Mac> {
        let m = self.moved.get(client)?;
        ctx.ports.get(m.port).map(|p| p.mac)
    }

    /// Re-asserts each client at risk, first noting the MAC the frame told it (`told`, if a
    /// port of ours holds it): until an update is out again, that is where it sends. A frame
    /// subject to the client's locktime does not change an entry rlbd's move set less than
    /// [`LOCKTIME_MS`] before: that client still sends where rlbd put it.
    fn reassert_all(
        &mut self,
        now: u64,
        what: &str,
        told: Option<Told>,
        risks: Vec<(ClientKey, &'static str)>,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        if let Some(t) = told.filter(|t| ctx.ports.iter().any(|p| p.mac == t.mac)) {
            for (client, _) in &risks {
                if let Some(m) = self.moved.get_mut(client) {
                    if !(t.locked && now < m.at_ms + LOCKTIME_MS) {
                        m.undone = Some((t.mac, now));
                    }
                }
            }
        }
        if risks.len() > 1 {
            log(
                out,
                Level::Debug,
                format!(
                    "one {what} frame puts {} moved clients at risk; re-asserting them",
                    risks.len()
                ),
            );
        }
        for (client, why) in risks {
            self.reassert(now, client, why, ctx, out);
        }
        self.on_timer(now, ctx, out);
    }

    /// ARP seen on a port: the host's own replies and requests would send a moved client back to
    /// where the kernel or the driver wants it; each is answered with a re-assertion.
    pub fn on_arp(&mut self, now: u64, seen: &ArpSeen, ctx: &Ctx, out: &mut Vec<Action>) {
        self.note_arp_answer(now, seen, ctx);
        let risks = at_risk(
            seen,
            |c| self.assigned_mac(c, ctx),
            self.moved.keys().copied(),
        );
        let risks = risks.into_iter().map(|(m, r)| (m, r.as_str())).collect();
        // A Linux client takes a plain ARP reply only past its locktime (1 s) after its entry
        // last changed; a request or the gratuitous form overrides it.
        let locked = seen.op == ARP_REPLY && seen.tpa != seen.spa;
        let told = Told {
            mac: seen.sha,
            locked,
        };
        self.reassert_all(now, "ARP", Some(told), risks, ctx, out);
    }

    /// Neighbor Discovery seen on a port: the IPv6 counterpart of [`on_arp`](Self::on_arp).
    pub fn on_nd(&mut self, now: u64, seen: &NdSeen, ctx: &Ctx, out: &mut Vec<Action>) {
        self.note_nd_answer(now, seen, ctx);
        let moved = &self.moved;
        let risks = nd_at_risk(
            seen,
            |ip| ctx.host.is_ours((*ip).into()),
            |ip, vlan| {
                moved
                    .iter()
                    .filter(|(k, _)| k.vlan == vlan)
                    .find(|(_, m)| {
                        m.claims
                            .iter()
                            .any(|c| matches!(c, Claim::V6 { client, .. } if client == ip))
                    })
                    .map(|(k, _)| *k)
            },
            |c| self.assigned_mac(c, ctx),
            moved.keys().copied(),
        );
        let risks = risks.into_iter().map(|(m, r)| (m, r.as_str())).collect();
        let said = seen.lladdr.unwrap_or(seen.eth_src);
        let told = Told {
            mac: said,
            locked: false,
        };
        self.reassert_all(now, "Neighbor Discovery", Some(told), risks, ctx, out);
    }

    /// Notes where the host's own ARP frame tells its hearers to send: a reply or a unicast
    /// request to one client, a broadcast request to every client on its VLAN. Clients rlbd
    /// moved are left to their move (it re-asserts them).
    fn note_arp_answer(&mut self, now: u64, seen: &ArpSeen, ctx: &Ctx) {
        if !self.cfg.follow_answers || !seen.outgoing {
            return;
        }
        let Some(port) = ctx.ports.iter().position(|p| p.mac == seen.sha) else {
            return;
        };
        if seen.eth_dst.is_multicast() {
            self.answered.broadcast(now, seen.vlan, port);
            return;
        }
        let key = ClientKey::new(seen.eth_dst, seen.vlan);
        // An update in the gratuitous form (rlbd's own) names no client address.
        let to_client = matches!(seen.op, ARP_REQUEST | ARP_REPLY) && seen.tpa != seen.spa;
        if to_client && !self.moved.contains_key(&key) {
            let claim = Claim::V4 {
                client: seen.tpa,
                server: seen.spa,
            };
            self.answered.note(now, key, port, claim);
        }
    }

    /// The IPv6 counterpart of [`note_arp_answer`](Self::note_arp_answer): the host's NA for
    /// one of its addresses, or its NS, tells the hearer the port's MAC.
    fn note_nd_answer(&mut self, now: u64, seen: &NdSeen, ctx: &Ctx) {
        if !self.cfg.follow_answers || !seen.outgoing {
            return;
        }
        let said = seen.lladdr.unwrap_or(seen.eth_src);
        let Some(port) = ctx.ports.iter().position(|p| p.mac == said) else {
            return;
        };
        // An NA advertises the server's target address to the client at the packet's
        // destination; an NS asks the client for the target from the server's source, and the
        // client learns the port's MAC for that source. A link-local one is the port's own
        // (each port has its own): no client reaches the server's other addresses through it.
        let (client, server) = match seen.kind {
            NdKind::Na => (seen.dst_ip, seen.target),
            NdKind::Ns => (seen.target, seen.src_ip),
        };
        if server.is_unicast_link_local() {
            return;
        }
        if seen.eth_dst.is_multicast() {
            self.answered.broadcast(now, seen.vlan, port);
            return;
        }
        let key = ClientKey::new(seen.eth_dst, seen.vlan);
        if self.moved.contains_key(&key) {
            return;
        }
        self.answered
            .note(now, key, port, Claim::V6 { client, server });
    }

    /// Ports' MACs changed, each given with its old one: a client the host told a port's old
    /// MAC sends to the port that holds it now. The ports that now hold a MAC the host gave out
    /// and are not usable (the failed active slave that took the next one's): the caller fails
    /// them over, as the clients the host left there are on a dead port. A MAC no port holds
    /// yet waits up to `SWAP_WINDOW_MS` for the port that takes it, told in a later batch.
    pub fn follow_port_macs(
        &mut self,
        now: u64,
        changed: &[(PortIndex, Mac)],
        ctx: &Ctx,
    ) -> Vec<PortIndex> {
        if changed.is_empty() {
            return Vec::new();
        }
        let mut given_up = std::mem::take(&mut self.macs_untaken);
        given_up.retain(|&(_, _, at)| now.saturating_sub(at) <= SWAP_WINDOW_MS);
        given_up.extend(changed.iter().map(|&(p, old)| (p, old, now)));
        let mut moved: Vec<(PortIndex, PortIndex)> = Vec::new();
        for (p, old, at) in given_up {
            match ctx.ports.iter().position(|q| q.mac == old) {
                Some(to) if to != p => moved.push((p, to)),
                Some(_) => {}
                // Bounded: one a port, the latest.
                None => {
                    self.macs_untaken.retain(|&(q, _, _)| q != p);
                    self.macs_untaken.push((p, old, at));
                }
            }
        }
        self.answered.follow_macs(&moved);
        self.macs_moved.retain(|&(p, _, at)| {
            now.saturating_sub(at) <= SWAP_WINDOW_MS && !moved.iter().any(|m| m.0 == p)
        });
        self.macs_moved
            .extend(moved.iter().map(|&(p, to)| (p, to, now)));
        let mut dead: Vec<PortIndex> = moved
            .iter()
            .map(|(_, to)| *to)
            .filter(|to| !ctx.ports.get(*to).is_some_and(|p| p.usable))
            .collect();
        dead.sort_unstable();
        dead.dedup();
        dead
    }

    /// A port's MAC changed (balance-alb swaps MACs on failover): re-asserts every client rlbd
    /// put on it, each update waiting its turn for the total budget rather than shed.
    pub fn on_port_mac_changed(
        &mut self,
        now: u64,
        port: PortIndex,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        let on: Vec<(ClientKey, &'static str)> = self
            .moved
            .iter()
            .filter(|(_, m)| m.port == port)
            .map(|(k, _)| (*k, "the port's MAC changed"))
            .collect();
        // Bounded by the moves: a client forgotten since needs no word of the new MAC.
        let moved = &self.moved;
        self.unheard.retain(|k, _| moved.contains_key(k));
        self.unheard.extend(on.iter().map(|(k, _)| (*k, 0)));
        self.reassert_all(now, "port MAC change", None, on, ctx, out);
    }
}
