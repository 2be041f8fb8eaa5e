//! One more program of rlbd's at one tc hook of a device (the guests' programs: at the bond's
//! egress, and at each slave's ingress after the counting program), however the counting
//! program is attached, and under the same rules towards an operator's filters (see the top of
//! `tc/mod.rs`):
//! - tcx links (Linux >= 6.6): appended last in the hook's list (`BPF_F_AFTER` with no relative
//!   program), so after the counting link, which is always put first; detached when the link's
//!   descriptor closes;
//! - `cls_bpf`: a filter at [`GUEST_PRIO`] / [`GUEST_HANDLE`], just after the counting
//!   filter's [`PRIO`], its program named [`GUEST_PREFIX`]`<dev>`; another filter at that
//!   priority is never touched (attaching fails), a stale one of rlbd's is replaced; on drop
//!   the filter goes, and the clsact qdisc too when it was made for it and holds no filter.
//!
//! tcx programs run before any `cls_bpf` filter: where the counting program is a filter, the
//! program after it must be one too (`links` false).

use super::*;

/// The guest filters' priority: right after the counting filter's.
pub const GUEST_PRIO: u16 = PRIO + 1;
pub const GUEST_HANDLE: u32 = HANDLE + 1;
/// How a guest filter of rlbd's is told from an operator's (`rlbdg_<dev>`).
pub const GUEST_PREFIX: &str = "rlbdg_";

/// Which of a device's two tc hooks: where frames arrive, or where they leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Ingress,
    Egress,
}

impl Direction {
    fn parent(self) -> TcHandle {
        match self {
            Direction::Ingress => INGRESS,
            Direction::Egress => EGRESS,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        }
    }
}

/// A program of rlbd's at one hook, after its others; detached on drop.
#[derive(Debug)]
pub enum HookAttached {
    Link(OwnedFd),
    Filter(HookFilter),
}

impl HookAttached {
    /// Attaches `prog` (named `prog_name`, which starts with [`GUEST_PREFIX`]) at `hook` of
    /// `dev` / `ifindex`: a tcx link where the kernel has them and `links` asks for them, else
    /// a `cls_bpf` filter.
    pub fn attach(
        dev: &str,
        ifindex: u32,
        hook: Direction,
        prog: BorrowedFd<'_>,
        prog_name: &str,
        links: bool,
    ) -> io::Result<HookAttached> {
        if links {
            match tcx_link_last(prog, ifindex, hook) {
                Ok(l) => {
                    remove_stale_filter(dev, ifindex, hook);
                    return Ok(HookAttached::Link(l));
                }
                Err(e) => debug!("{dev}: no tcx link at {} ({e}): cls_bpf", hook.name()),
            }
        }
        HookFilter::attach(dev, ifindex, hook, prog, prog_name).map(HookAttached::Filter)
    }

    /// How: "tcx" (a link) or "cls_bpf" (a filter).
    pub fn how(&self) -> &'static str {
        match self {
            HookAttached::Link(_) => "tcx",
            HookAttached::Filter(_) => "cls_bpf",
        }
    }
}

/// A tcx link holding `prog` last at `hook` of `ifindex`.
fn tcx_link_last(prog: BorrowedFd<'_>, ifindex: u32, hook: Direction) -> io::Result<OwnedFd> {
    sys::tcx_link_last(prog, ifindex, hook == Direction::Ingress).map_err(|e| {
        let at = hook.name();
        io::Error::new(
            e.kind(),
            format!("tcx link at {at} (ifindex {ifindex}): {e}"),
        )
    })
}

/// A guest filter a killed rlbd left at `hook` still acts on its orphaned pins: with a link
/// in its place it goes, with the qdisc if nothing else uses it. Someone else's stays.
fn remove_stale_filter(dev: &str, ifindex: u32, hook: Direction) {
    let Ok(nl) = Nl::new() else { return };
    match nl.filters(ifindex, hook.parent()) {
        Ok(f) if at_guest_prio(&f) == AtPrio::Ours => {}
        _ => return,
    }
    warn!("{dev}: removing the guest tc filter a previous rlbd left");
    let m = guest_filter_msg(ifindex, hook);
    if let Err(e) = nl.exchange(RouteNetlinkMessage::DelTrafficFilter(m), NLM_F_ACK) {
        warn!("{dev}: removing the guest tc filter a previous rlbd left: {e}");
    } else if no_filters(&nl, ifindex) {
        let _ = nl.del_clsact(ifindex);
    }
}

/// Whether neither hook of `ifindex` holds a filter.
fn no_filters(nl: &Nl, ifindex: u32) -> bool {
    [INGRESS, EGRESS]
        .iter()
        .all(|p| nl.filters(ifindex, *p).is_ok_and(|f| f.is_empty()))
}

/// rlbd's filter at [`GUEST_PRIO`] of one hook; removed on drop.
#[derive(Debug)]
pub struct HookFilter {
    ifindex: u32,
    dev: String,
    hook: Direction,
    own_qdisc: bool,
}

impl HookFilter {
    pub fn attach(
        dev: &str,
        ifindex: u32,
        hook: Direction,
        prog: BorrowedFd<'_>,
        prog_name: &str,
    ) -> io::Result<HookFilter> {
        let nl = Nl::new()?;
        let made = nl.add_clsact(ifindex)?;
        let found = match nl.filters(ifindex, hook.parent()) {
            Ok(f) => at_guest_prio(&f),
            Err(e) => return Err(nl.undo_qdisc(ifindex, made, e)),
        };
        if let AtPrio::Foreign(what) = found {
            let e = io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "{dev}: tc priority {GUEST_PRIO} at {} holds a filter not rlbd's ({what})",
                    hook.name()
                ),
            );
            return Err(nl.undo_qdisc(ifindex, made, e));
        }
        if found == AtPrio::Ours {
            warn!("{dev}: replacing the guest tc filter a previous rlbd left");
        }
        let mut m = guest_filter_msg(ifindex, hook);
        m.attributes.push(TcAttribute::Options(vec![
            TcOption::Bpf(TcFilterBpfOption::ProgFd(prog.as_raw_fd() as u32)),
            TcOption::Bpf(TcFilterBpfOption::ProgName(prog_name.to_owned())),
            TcOption::Bpf(TcFilterBpfOption::Flags(TcBpfFlags::DirectAction)),
        ]));
        let flags = NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
        if let Err(e) = nl.exchange(RouteNetlinkMessage::NewTrafficFilter(m), flags) {
            let e = io::Error::new(e.kind(), format!("{dev}: adding a tc filter: {e}"));
            return Err(nl.undo_qdisc(ifindex, made, e));
        }
        Ok(HookFilter {
            ifindex,
            dev: dev.to_owned(),
            hook,
            own_qdisc: made,
        })
    }
}

fn guest_filter_msg(ifindex: u32, hook: Direction) -> TcMessage {
    let mut m = TcMessage::with_index(ifindex as i32);
    m.header.parent = hook.parent();
    m.header.handle = TcHandle::from(GUEST_HANDLE);
    m.header.info = (u32::from(GUEST_PRIO) << 16) | u32::from(ETH_P_ALL.to_be());
    m.attributes.push(TcAttribute::Kind("bpf".into()));
    m
}

impl Drop for HookFilter {
    fn drop(&mut self) {
        let Ok(nl) = Nl::new() else {
            warn!("{}: cannot remove the guest tc filter", self.dev);
            return;
        };
        let m = guest_filter_msg(self.ifindex, self.hook);
        match nl.exchange(RouteNetlinkMessage::DelTrafficFilter(m), NLM_F_ACK) {
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => return,
            Err(e) if e.raw_os_error() != Some(libc::ENOENT) => {
                warn!("{}: removing the guest tc filter: {e}", self.dev)
            }
            _ => debug!("{}: guest tc filter removed", self.dev),
        }
        if self.own_qdisc && no_filters(&nl, self.ifindex) {
            if let Err(e) = nl.del_clsact(self.ifindex) {
                warn!("{}: removing the clsact qdisc rlbd made: {e}", self.dev);
            }
        }
    }
}

/// What sits at [`GUEST_PRIO`] among the filters of one hook's dump.
pub(crate) fn at_guest_prio(filters: &[TcMessage]) -> AtPrio {
    let mut at = AtPrio::Free;
    for f in filters
        .iter()
        .filter(|f| f.header.info >> 16 == u32::from(GUEST_PRIO))
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
            (Some("bpf"), Some(n)) if n.starts_with(GUEST_PREFIX) => at = AtPrio::Ours,
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

#[cfg(test)]
mod tests;
