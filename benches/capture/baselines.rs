//! The receivers rlbd's capture path is measured against in the namespace benchmark (roles of
//! this binary, as `recv.rs`'s): the tc hook with a program that does nothing (the floor under
//! counting there), and a naive pnet_datalink receiver (what a straightforward tool costs).

use std::collections::HashMap;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rlbd::capture::Mac;
use rlbd_lab::flood::thread_cpu_ns;

use super::recv::{ready, status_kb};
use super::{Res, RX_MAC};

/// The floor under counting at the tc hook: a program that does nothing at `iface`'s tcx
/// ingress, no tap, nothing read, until stdin closes. What a frame costs the kernel with it is
/// what the hook costs before a program does any work.
pub(super) fn recv_floor(iface: &str) -> Res<String> {
    let ifindex = rlbd::capture::socket::if_index(iface).map_err(|e| e.to_string())?;
    let link = rlbd::capture::ebpf::tc::empty_program_at_ingress(ifindex)
        .map_err(|e| format!("an empty program at {iface}'s tcx ingress: {e}"))?;
    ready();
    // Held until stdin closes (the bench's "mark" lines mean nothing here).
    let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
    drop(link);
    Ok(format!(
        "counted=0 packets=0 drops=0 cpu_ns=0 hwm_kb={} rss_kb={} clients=0 evictions=0 \
         ratio=1 ratios=-",
        status_kb("VmHWM"),
        status_kb("VmRSS"),
    ))
}

/// The naive receiver: pnet_datalink's channel, one `recv` per frame, a full copy, a map of
/// frames per sender. The socket is made the way pnet makes it, but here, so that its kernel
/// drop counter can be read (pnet does not hand its descriptor out).
pub(super) fn recv_pnet(iface: &str) -> Res<String> {
    use pnet_datalink::{Channel, Config};
    let nic = pnet_datalink::interfaces()
        .into_iter()
        .find(|i| i.name == iface)
        .ok_or_else(|| format!("no interface {iface}"))?;
    // SAFETY: plain socket(2) call with constant arguments.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW,
            (libc::ETH_P_ALL as u16).to_be() as i32,
        )
    };
    if fd < 0 {
        return Err(format!("socket: {}", std::io::Error::last_os_error()));
    }
    let config = Config {
        read_timeout: Some(Duration::from_millis(20)),
        socket_fd: Some(fd),
        ..Config::default()
    };
    // pnet owns (and closes) `fd` from here.
    let mut rx = match pnet_datalink::channel(&nic, config) {
        Ok(Channel::Ethernet(_tx, rx)) => rx,
        Ok(_) => return Err("unexpected channel type".into()),
        Err(e) => return Err(format!("pnet channel on {iface}: {e}")),
    };
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            while matches!(std::io::stdin().read(&mut buf), Ok(n) if n > 0) {}
            stop.store(true, Ordering::Relaxed);
        });
    }
    let mut per_sender: HashMap<Mac, u64> = HashMap::new();
    let mut counted = 0u64;
    ready();
    let cpu0 = thread_cpu_ns();
    loop {
        match rx.next() {
            Ok(bytes) => {
                let frame = bytes.to_vec();
                if frame.len() >= 14 && frame[0..6] == RX_MAC.octets() && frame[12..14] == [8, 0] {
                    let mut src = [0u8; 6];
                    src.copy_from_slice(&frame[6..12]);
                    *per_sender.entry(Mac::from(src)).or_insert(0) += 1;
                    counted += 1;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            Err(e) => return Err(format!("recv: {e}")),
        }
    }
    let cpu_ns = thread_cpu_ns() - cpu0;
    let st = packet_stats(fd)?;
    drop(rx);
    Ok(format!(
        "counted={counted} packets={} drops={} cpu_ns={cpu_ns} hwm_kb={} rss_kb={} clients={} \
         evictions=0 ratio=1 ratios=-",
        st.tp_packets,
        st.tp_drops,
        status_kb("VmHWM"),
        status_kb("VmRSS"),
        per_sender.len()
    ))
}

fn packet_stats(fd: i32) -> Res<libc::tpacket_stats> {
    let mut st = libc::tpacket_stats {
        tp_packets: 0,
        tp_drops: 0,
    };
    let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: `st` is writable and `len` its size; `fd` is still open (owned by the caller's
    // channel, alive).
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(format!(
            "PACKET_STATISTICS: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(st)
}
