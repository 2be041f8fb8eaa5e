//! A port held promiscuous by rlbd: an AF_PACKET socket that receives nothing (protocol 0,
//! drop-all filter) holding a `PACKET_MR_PROMISC` membership on the port. The kernel counts
//! promiscuity per holder and drops the socket's hold when the descriptor closes, also when rlbd
//! is killed: the port is given back exactly as it was found (an operator's own promiscuous mode
//! included), with nothing to undo by hand.
//!
//! Guests behind a balance-alb bond need it: a non-active slave's receive filter holds only the
//! bond's own MACs, so frames the switch sends there for a guest's MAC are dropped by the NIC
//! unless the port is promiscuous (the bond makes only the active slave so, for the bridge).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::setup::quiet_socket;

#[derive(Debug)]
pub struct Promiscuous {
    _fd: OwnedFd,
    pub ifindex: u32,
}

impl Promiscuous {
    /// Holds port `ifindex` promiscuous until dropped.
    pub fn hold(ifindex: u32) -> io::Result<Promiscuous> {
        let fd =
            quiet_socket().map_err(|(what, e)| io::Error::new(e.kind(), format!("{what}: {e}")))?;
        let index = i32::try_from(ifindex)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "ifindex out of range"))?;
        let mreq = libc::packet_mreq {
            mr_ifindex: index,
            mr_type: libc::PACKET_MR_PROMISC as u16,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        // SAFETY: `mreq` is a valid packet_mreq that outlives the call; the kernel copies it.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                std::ptr::from_ref(&mreq).cast(),
                std::mem::size_of::<libc::packet_mreq>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("PACKET_MR_PROMISC: {e}")));
        }
        Ok(Promiscuous { _fd: fd, ifindex })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This (test-spawned) thread in a network namespace of its own, with a veth pair.
    fn veth_pair() -> Result<(), String> {
        // SAFETY: unshare only moves this (test-spawned) thread into a new network namespace.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(format!(
                "unshare(CLONE_NEWNET): {}",
                io::Error::last_os_error()
            ));
        }
        let ok = std::process::Command::new("ip")
            .args([
                "link", "add", "cap0", "type", "veth", "peer", "name", "peer0",
            ])
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(())
            .ok_or_else(|| "cannot make a veth pair".into())
    }

    /// The port's promiscuity count, as the kernel shows it (`ip -d link`: promiscuity N).
    fn promiscuity(dev: &str) -> Result<u32, String> {
        let out = std::process::Command::new("ip")
            .args(["-d", "link", "show", dev])
            .output()
            .map_err(|e| format!("ip: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let n = text
            .split("promiscuity ")
            .nth(1)
            .and_then(|a| a.split_whitespace().next());
        n.and_then(|n| n.parse().ok())
            .ok_or(format!("no promiscuity in {text:?}"))
    }

    #[test]
    fn a_held_port_is_promiscuous_until_the_hold_is_dropped() {
        crate::test_support::in_own_thread("promiscuous hold", || {
            veth_pair()?;
            let ifindex = crate::capture::socket::if_index("cap0").map_err(|e| e.to_string())?;
            assert_eq!(promiscuity("cap0")?, 0);
            let held = Promiscuous::hold(ifindex).expect("hold cap0 promiscuous");
            let second = Promiscuous::hold(ifindex).expect("a second holder");
            assert_eq!(promiscuity("cap0")?, 2);
            drop(held);
            assert_eq!(promiscuity("cap0")?, 1);
            drop(second);
            assert_eq!(promiscuity("cap0")?, 0, "given back exactly as found");
            Ok(())
        });
    }
}
