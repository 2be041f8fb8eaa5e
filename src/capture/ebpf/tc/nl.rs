//! The tc hooks' rtnetlink exchanges: a blocking socket, one request and its answer at a time.

use super::*;

/// A blocking rtnetlink socket for one exchange at a time.
pub(super) struct Nl {
    sock: Socket,
    seq: std::cell::Cell<u32>,
}

fn ctx(what: &str, ifindex: u32) -> impl Fn(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{what} (ifindex {ifindex}): {e}"))
}

impl Nl {
    pub(super) fn new() -> io::Result<Nl> {
        let wrap = |e: io::Error| io::Error::new(e.kind(), format!("NETLINK_ROUTE socket: {e}"));
        let mut sock = Socket::new(NETLINK_ROUTE).map_err(wrap)?;
        sock.bind_auto().map_err(wrap)?;
        let tv = libc::timeval {
            tv_sec: ANSWER_TIMEOUT.as_secs() as libc::time_t,
            tv_usec: 0,
        };
        // SAFETY: `tv` is a live timeval and the length passed is its size.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(wrap(io::Error::last_os_error()));
        }
        Ok(Nl {
            sock,
            seq: std::cell::Cell::new(1),
        })
    }

    /// Sends `msg` with `flags` and collects the answer: the messages of a dump, or nothing
    /// for an acknowledged request.
    pub(super) fn exchange(
        &self,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> io::Result<Vec<TcMessage>> {
        let seq = self.seq.get();
        self.seq.set(seq.wrapping_add(1));
        let buf = crate::netlink::rtnl_request(msg, flags, seq);
        self.sock.send_to(&buf, &SocketAddr::new(0, 0), 0)?;
        let mut out = Vec::new();
        loop {
            let (data, _) = self.sock.recv_from_full()?;
            if take(&data, seq, &mut out)? {
                return Ok(out);
            }
        }
    }

    /// Adds a clsact qdisc; false when the port has one (or an ingress qdisc) already.
    pub(super) fn add_clsact(&self, ifindex: u32) -> io::Result<bool> {
        let mut m = TcMessage::with_index(ifindex as i32);
        m.header.parent = TcHandle::CLSACT;
        m.header.handle = TcHandle {
            major: 0xffff,
            minor: 0,
        };
        m.attributes.push(TcAttribute::Kind("clsact".into()));
        let flags = NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
        match self.exchange(RouteNetlinkMessage::NewQueueDiscipline(m), flags) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(false),
            Err(e) => Err(ctx("adding a clsact qdisc", ifindex)(e)),
        }
    }

    pub(super) fn del_clsact(&self, ifindex: u32) -> io::Result<()> {
        let mut m = TcMessage::with_index(ifindex as i32);
        m.header.parent = TcHandle::CLSACT;
        m.header.handle = TcHandle {
            major: 0xffff,
            minor: 0,
        };
        self.exchange(RouteNetlinkMessage::DelQueueDiscipline(m), NLM_F_ACK)
            .map(|_| ())
            .map_err(ctx("deleting the clsact qdisc", ifindex))
    }

    /// On a failed attach: the qdisc goes again if it was made for it.
    pub(super) fn undo_qdisc(&self, ifindex: u32, made: bool, e: io::Error) -> io::Error {
        if made {
            if let Err(d) = self.del_clsact(ifindex) {
                warn!("{d}");
            }
        }
        e
    }

    pub(super) fn filters(&self, ifindex: u32, parent: TcHandle) -> io::Result<Vec<TcMessage>> {
        let mut m = TcMessage::with_index(ifindex as i32);
        m.header.parent = parent;
        self.exchange(RouteNetlinkMessage::GetTrafficFilter(m), NLM_F_DUMP)
            .map_err(ctx("listing tc filters", ifindex))
    }

    /// What sits at [`PRIO`] at either hook (someone else's at one of them wins).
    pub(super) fn at_prio(&self, ifindex: u32) -> io::Result<AtPrio> {
        let (i, e) = (
            classify(&self.filters(ifindex, INGRESS)?),
            classify(&self.filters(ifindex, EGRESS)?),
        );
        Ok(match (i, e) {
            (AtPrio::Foreign(w), _) | (_, AtPrio::Foreign(w)) => AtPrio::Foreign(w),
            (AtPrio::Ours, _) | (_, AtPrio::Ours) => AtPrio::Ours,
            _ => AtPrio::Free,
        })
    }

    /// Filters at either hook other than rlbd's.
    pub(super) fn others(&self, ifindex: u32) -> io::Result<usize> {
        let mut n = 0;
        for parent in [INGRESS, EGRESS] {
            let f = self.filters(ifindex, parent)?;
            n += f
                .iter()
                .filter(|f| f.header.info >> 16 != u32::from(PRIO))
                .count();
        }
        Ok(n)
    }

    pub(super) fn filter_msg(ifindex: u32, parent: TcHandle) -> TcMessage {
        let mut m = TcMessage::with_index(ifindex as i32);
        m.header.parent = parent;
        m.header.handle = TcHandle::from(HANDLE);
        m.header.info = (u32::from(PRIO) << 16) | u32::from(ETH_P_ALL.to_be());
        m.attributes.push(TcAttribute::Kind("bpf".into()));
        m
    }

    /// Adds rlbd's filter at hook `parent`, or replaces the program of the one there.
    pub(super) fn put_filter(
        &self,
        ifindex: u32,
        parent: TcHandle,
        prog: BorrowedFd<'_>,
        name: &str,
    ) -> io::Result<()> {
        let mut m = Self::filter_msg(ifindex, parent);
        m.attributes.push(TcAttribute::Options(vec![
            TcOption::Bpf(TcFilterBpfOption::ProgFd(prog.as_raw_fd() as u32)),
            TcOption::Bpf(TcFilterBpfOption::ProgName(name.to_owned())),
            TcOption::Bpf(TcFilterBpfOption::Flags(TcBpfFlags::DirectAction)),
        ]));
        let flags = NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
        self.exchange(RouteNetlinkMessage::NewTrafficFilter(m), flags)
            .map(|_| ())
            .map_err(ctx("adding a tc filter", ifindex))
    }

    /// Deletes rlbd's filters at both hooks (one missing is no error).
    pub(super) fn del_filters(&self, ifindex: u32) -> io::Result<()> {
        let mut first = Ok(());
        for parent in [INGRESS, EGRESS] {
            let m = Self::filter_msg(ifindex, parent);
            match self.exchange(RouteNetlinkMessage::DelTrafficFilter(m), NLM_F_ACK) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) if first.is_ok() => first = Err(e),
                Err(_) => {}
            }
        }
        first
    }
}

/// Takes the messages answering request `seq` out of one datagram into `out`; true once the
/// answer is complete (the dump's end, or the request's acknowledgement). A refusal is the
/// error. Filters the crate cannot decode are kept with their header alone (enough to see
/// their priority; they count as someone else's).
pub(super) fn take(data: &[u8], seq: u32, out: &mut Vec<TcMessage>) -> io::Result<bool> {
    let mut pos = 0;
    while pos < data.len() {
        let buf = NetlinkBuffer::new_checked(&data[pos..])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("rtnetlink: {e}")))?;
        pos += (buf.length() as usize).next_multiple_of(4).max(16);
        if buf.sequence_number() != seq {
            continue;
        }
        let payload = buf.payload();
        match buf.message_type() {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let code = payload
                    .get(..4)
                    .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                return match code {
                    0 => Ok(true),
                    c => Err(io::Error::from_raw_os_error(c.saturating_neg())),
                };
            }
            RTM_NEWTFILTER => out.push(TcMessage::parse(payload).unwrap_or_else(|_| {
                let word = |i: usize| {
                    payload
                        .get(i..i + 4)
                        .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                };
                let mut m = TcMessage::with_index(word(4) as i32);
                m.header.handle = TcHandle::from(word(8));
                m.header.info = word(16);
                m.attributes.push(TcAttribute::Kind("undecodable".into()));
                m
            })),
            _ => {}
        }
    }
    Ok(false)
}
