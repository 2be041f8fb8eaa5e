//! The programs at a port's tc hooks. Where the kernel has tcx (Linux >= 6.6), a BPF link at
//! each hook ([`TcxLinks`]): first in the hook's list of programs, beside any others, and
//! detached by the kernel when the link's descriptor closes, also when rlbd is killed. The
//! classifier path of older kernels costs more per frame (the classifier chain around the
//! program) and outlives a killed rlbd.
//!
//! Elsewhere, through rtnetlink: a `clsact` qdisc (made only when the port has none) and one
//! `cls_bpf` filter at each of its ingress and egress hooks, direct-action, at a priority and
//! handle of rlbd's own ([`PRIO`], [`HANDLE`]) with the programs named `rlbd_<port>`.
//!
//! Rules, so that an operator's tc setup is never disturbed:
//! - another filter at [`PRIO`] at either hook (another kind, or a program not named `rlbd_*`)
//!   is never touched: attaching fails and rlbd counts on the capture socket instead;
//! - a filter of rlbd's own at [`PRIO`] (a crashed rlbd's, still counting into its orphaned
//!   map) is replaced in place;
//! - on drop the filters are deleted, and the qdisc too when rlbd made it (or found it holding
//!   only stale filters of its own) and it holds no other filter at either hook.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use log::{debug, warn};
use netlink_packet_core::Parseable;
use netlink_packet_core::{
    NetlinkBuffer, NLMSG_DONE, NLMSG_ERROR, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL,
    NLM_F_REPLACE,
};
use netlink_packet_route::tc::{
    TcAttribute, TcBpfFlags, TcFilterBpfOption, TcHandle, TcMessage, TcOption,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use super::sys;

/// rlbd's filter priority at the ingress hook: distinctive, so that a filter left by a crashed
/// rlbd is recognised, and low enough to run before the priorities tc picks by itself (49152
/// and up). A filter of the operator's at a lower number that ends classification with a
/// verdict hides its frames from the count.
pub const PRIO: u16 = 0x1bd;
/// rlbd's filter handle at [`PRIO`].
pub const HANDLE: u32 = 0x1bd;
/// Prefix of every program rlbd loads (`rlbd_<port>`), how a stale filter is told from an
/// operator's.
pub const NAME_PREFIX: &str = "rlbd_";
const ETH_P_ALL: u16 = 0x0003;
/// rtnetlink's message type of a filter (in a dump, and in notifications).
const RTM_NEWTFILTER: u16 = 44;
const INGRESS: TcHandle = TcHandle {
    major: 0xffff,
    minor: TcHandle::MIN_INGRESS,
};
const EGRESS: TcHandle = TcHandle {
    major: 0xffff,
    minor: TcHandle::MIN_EGRESS,
};
/// An answer the kernel owes us within this (it answers at once; a lost one must not hang the
/// daemon's start or exit).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// The programs at one port's tc hooks, however attached.
#[derive(Debug)]
pub enum TcAttached {
    Links(TcxLinks),
    Filter(TcFilter),
}

impl TcAttached {
    /// Attaches `ingress` and `egress` at the hooks of `port` / `ifindex`: tcx links where the
    /// kernel has them and `links` asks for them, else `cls_bpf` filters.
    pub fn attach(
        port: &str,
        ifindex: u32,
        ingress: BorrowedFd<'_>,
        egress: BorrowedFd<'_>,
        prog_name: &str,
        links: bool,
    ) -> io::Result<TcAttached> {
        if links {
            match TcxLinks::attach(ifindex, ingress, egress) {
                Ok(links) => {
                    remove_stale_filters(port, ifindex);
                    return Ok(TcAttached::Links(links));
                }
                Err(e) => debug!("port {port}: no tcx links ({e}): cls_bpf filters instead"),
            }
        }
        TcFilter::attach(port, ifindex, ingress, egress, prog_name).map(TcAttached::Filter)
    }

    /// Swaps in another ingress program, atomically.
    pub fn replace(&self, prog: BorrowedFd<'_>, prog_name: &str) -> io::Result<()> {
        match self {
            TcAttached::Links(l) => sys::link_update(l.ingress.as_fd(), prog)
                .map_err(|e| io::Error::new(e.kind(), format!("updating the tcx link: {e}"))),
            TcAttached::Filter(f) => f.replace(prog, prog_name),
        }
    }

    /// How: "tcx" (links) or "cls_bpf" (filters).
    pub fn how(&self) -> &'static str {
        match self {
            TcAttached::Links(_) => "tcx",
            TcAttached::Filter(_) => "cls_bpf",
        }
    }
}

/// rlbd's tcx links at one port's hooks: closing them detaches the programs.
#[derive(Debug)]
pub struct TcxLinks {
    ingress: OwnedFd,
    _egress: OwnedFd,
}

impl TcxLinks {
    fn attach(ifindex: u32, ingress: BorrowedFd<'_>, egress: BorrowedFd<'_>) -> io::Result<Self> {
        let ctx = |hook: &'static str| {
            move |e: io::Error| {
                io::Error::new(
                    e.kind(),
                    format!("tcx link at {hook} (ifindex {ifindex}): {e}"),
                )
            }
        };
        let i = sys::tcx_link(ingress, ifindex, true).map_err(ctx("ingress"))?;
        let e = sys::tcx_link(egress, ifindex, false).map_err(ctx("egress"))?;
        Ok(TcxLinks {
            ingress: i,
            _egress: e,
        })
    }
}

/// The floor under any counting at the tc hook, for the capture bench: a program that does
/// nothing but answer "no verdict", attached by a tcx link at `ifindex`'s ingress until the
/// returned link is dropped. What a frame costs with it is what the hook costs before any
/// program does work.
#[doc(hidden)]
pub fn empty_program_at_ingress(ifindex: u32) -> io::Result<OwnedFd> {
    use super::insn::{Asm, Reg};
    let mut a = Asm::new();
    a.mov_imm(Reg::R0, -1).exit();
    let insns = a
        .finish()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let prog = sys::prog_load(sys::BPF_PROG_TYPE_SCHED_CLS, &insns, "rlbd_floor")?;
    // The link holds the program; the program's descriptor can go.
    sys::tcx_link(prog.as_fd(), ifindex, true)
}

/// Filters a killed rlbd left at [`PRIO`] still count into their orphaned maps: with links in
/// their place they go, with the qdisc if nothing else uses it. Someone else's are left alone.
fn remove_stale_filters(port: &str, ifindex: u32) {
    let Ok(nl) = Nl::new() else { return };
    if nl.at_prio(ifindex).ok() != Some(AtPrio::Ours) {
        return;
    }
    warn!("port {port}: removing the tc filters a previous rlbd left");
    if let Err(e) = nl.del_filters(ifindex) {
        warn!("port {port}: removing the tc filters a previous rlbd left: {e}");
    } else if nl.others(ifindex).is_ok_and(|n| n == 0) {
        let _ = nl.del_clsact(ifindex);
    }
}

/// rlbd's filters at one port's tc hooks; removed on drop.
#[derive(Debug)]
pub struct TcFilter {
    ifindex: u32,
    port: String,
    /// Whether to remove the clsact qdisc after the filter (when nothing else uses it).
    own_qdisc: bool,
}

/// What sits at [`PRIO`] on a port's ingress hook.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AtPrio {
    Free,
    /// rlbd's own filter (a program named `rlbd_*`).
    Ours,
    /// Someone else's: its kind and program name.
    Foreign(String),
}

impl TcFilter {
    /// Attaches `ingress` and `egress` (both named `prog_name`) at the hooks of `port` /
    /// `ifindex`.
    pub fn attach(
        port: &str,
        ifindex: u32,
        ingress: BorrowedFd<'_>,
        egress: BorrowedFd<'_>,
        prog_name: &str,
    ) -> io::Result<TcFilter> {
        let nl = Nl::new()?;
        let made = nl.add_clsact(ifindex)?;
        let found = match nl.at_prio(ifindex) {
            Ok(f) => f,
            Err(e) => return Err(nl.undo_qdisc(ifindex, made, e)),
        };
        if let AtPrio::Foreign(what) = &found {
            let e = io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("tc priority {PRIO} holds a filter not rlbd's ({what})"),
            );
            return Err(nl.undo_qdisc(ifindex, made, e));
        }
        if found == AtPrio::Ours {
            warn!("port {port}: replacing the tc filters a previous rlbd left");
        }
        let put = nl
            .put_filter(ifindex, INGRESS, ingress, prog_name)
            .and_then(|()| nl.put_filter(ifindex, EGRESS, egress, prog_name));
        if let Err(e) = put {
            let _ = nl.del_filters(ifindex);
            return Err(nl.undo_qdisc(ifindex, made, e));
        }
        // A qdisc that held only stale filters of rlbd's was rlbd's too.
        let own_qdisc = made || (found == AtPrio::Ours && nl.others(ifindex).is_ok_and(|n| n == 0));
        Ok(TcFilter {
            ifindex,
            port: port.to_owned(),
            own_qdisc,
        })
    }

    /// Swaps in another ingress program (atomically: the kernel replaces the filter's program
    /// in place).
    pub fn replace(&self, prog: BorrowedFd<'_>, prog_name: &str) -> io::Result<()> {
        Nl::new()?.put_filter(self.ifindex, INGRESS, prog, prog_name)
    }

    /// The interface the filters are on.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }
}

impl Drop for TcFilter {
    fn drop(&mut self) {
        let nl = match Nl::new() {
            Ok(nl) => nl,
            Err(e) => {
                warn!(
                    "port {}: cannot remove the tc counting filter: {e}",
                    self.port
                );
                return;
            }
        };
        match nl.del_filters(self.ifindex) {
            // The port is gone, and its hooks with it.
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => return,
            Err(e) => warn!("port {}: removing the tc filters: {e}", self.port),
            Ok(()) => debug!("port {}: tc filters removed", self.port),
        }
        if self.own_qdisc && nl.others(self.ifindex).is_ok_and(|n| n == 0) {
            if let Err(e) = nl.del_clsact(self.ifindex) {
                warn!(
                    "port {}: removing the clsact qdisc rlbd made: {e}",
                    self.port
                );
            }
        }
    }
}

/// What sits at [`PRIO`] among the filters of a dump.
pub(crate) fn classify(filters: &[TcMessage]) -> AtPrio {
    let mut at = AtPrio::Free;
    for f in filters
        .iter()
        .filter(|f| f.header.info >> 16 == u32::from(PRIO))
    {
        let kind = f.attributes.iter().find_map(|a| match a {
            TcAttribute::Kind(k) => Some(k.as_str()),
            _ => None,
        });
        let name = f.attributes.iter().find_map(|a| match a {
            TcAttribute::Options(o) => o.iter().find_map(|o| match o {
                TcOption::Bpf(TcFilterBpfOption::ProgName(n)) => Some(n.as_str()),
                _ => None,
            }),
            _ => None,
        });
        match (kind, name) {
            (Some("bpf"), Some(n)) if n.starts_with(NAME_PREFIX) => at = AtPrio::Ours,
            // The filter chain's own entry (no handle) names no program.
            (Some("bpf"), None) if f.header.handle == TcHandle::UNSPEC => {}
            (k, n) => {
                return AtPrio::Foreign(format!(
                    "kind {}, program {}",
                    k.unwrap_or("?"),
                    n.unwrap_or("unnamed")
                ))
            }
        }
    }
    at
}

pub mod hook;
mod nl;
#[cfg(test)]
use nl::take;
use nl::Nl;

#[cfg(test)]
mod tests;
