//! A throwaway namespace lab built from iproute2 commands (root only).
//!
//! ```text
//!   srv: p0, p1 (both 198.18.0.1/24)          c1..c4: eth0 198.18.0.11..14/24
//!          |    |                                  |
//!   sw:  s-p0  s-p1 ---- br0 ---- s-c1 .. s-c4 ----+
//!        (tc tbf CAP on s-p0 / s-p1 egress, i.e. toward the server)
//! ```
//!
//! Clients c1, c3 start on p0's MAC and c2, c4 on p1's (a dynamic neighbour entry, overridable by
//! ARP like one learnt from the wire). The server's entries for the clients are seeded permanent
//! on both ports, so the server itself never sends an ARP request that would scatter them. Every namespace made is deleted on drop, on error and on
//! Ctrl-C/SIGTERM (checked in the lab's waits); every process found in them is killed first.
//!
//! The lab is assembled here; `topology` builds it, `neigh` places clients and reads where they
//! are, `counters` reads what the server received, `procs` runs and stops what runs inside it,
//! `shell` runs the host's tools.

mod counters;
mod neigh;
mod procs;
mod shell;
mod topology;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

pub use counters::{read_rx_bytes, sum_bytes_received};
pub use neigh::parse_lladdr;
pub use shell::{check_tools, is_root, run_cmd, stop_flag};
pub use topology::{kernel_hz, tbf_burst_bytes};

/// The server's address on every port.
pub const SERVER_IP: &str = "198.18.0.1";
/// The ports of the server in the default lab, in order.
pub const PORTS: [&str; 2] = ["p0", "p1"];
/// The clients of the default lab, in order; client `cN` has address 198.18.0.(10+N).
pub const CLIENTS: [&str; 4] = ["c1", "c2", "c3", "c4"];
/// Every port name a lab can have ([`Lab::build_sized`]); a lab with `n` ports has the first `n`.
pub const ALL_PORTS: [&str; 8] = ["p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"];
/// Every client name a lab can have; a lab with `n` clients has the first `n`.
pub const ALL_CLIENTS: [&str; 16] = [
    "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "c10", "c11", "c12", "c13", "c14", "c15",
    "c16",
];
/// The TCP port the lab sink listens on.
pub const SINK_PORT: u16 = 5001;
/// The server's IPv6 address on every port, with [`LabOptions::ipv6`] (documentation prefix).
pub const SERVER_IP6: &str = "2001:db8:77::1";

/// What a lab is built with beyond the default (IPv4 only).
#[derive(Debug, Clone, Copy, Default)]
pub struct LabOptions {
    /// IPv6 on the server's ports and the clients: [`SERVER_IP6`]/64 on both ports, client `cN`
    /// at 2001:db8:77::1N/64, all without DAD, no router solicitations or autoconfiguration.
    /// The switch stays IPv6-free (it only bridges).
    pub ipv6: bool,
}

/// IPv6 address of client `cN` (`c1` -> 2001:db8:77::11), with [`LabOptions::ipv6`].
pub fn client_ip6(client: &str) -> LabResult<String> {
    let v4 = client_ip(client)?;
    let n = v4.rsplit('.').next().unwrap_or_default();
    Ok(format!("2001:db8:77::{n}"))
}

/// Errors are plain messages: every one is meant for a person reading a failed lab run.
pub type LabResult<T> = Result<T, String>;

static SERIAL: AtomicUsize = AtomicUsize::new(0);

/// Address of client `cN` (`c1` -> 198.18.0.11).
pub fn client_ip(client: &str) -> LabResult<String> {
    let n: u8 = client
        .strip_prefix('c')
        .and_then(|n| n.parse().ok())
        .filter(|n| (1..=ALL_CLIENTS.len() as u8).contains(n))
        .ok_or_else(|| format!("no such client {client}"))?;
    Ok(format!("198.18.0.{}", 10 + n))
}

/// The port a client is placed on when the default lab is built: c1, c3 on p0; c2, c4 on p1.
pub fn initial_port(client: &str) -> &'static str {
    initial_port_of(client, PORTS.len())
}

/// Round robin over `ports` ports by client number: c1 on p0, c2 on p1, ...
fn initial_port_of(client: &str, ports: usize) -> &'static str {
    let n: usize = client
        .strip_prefix('c')
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    ALL_PORTS[(n.max(1) - 1) % ports.clamp(1, ALL_PORTS.len())]
}

/// The built lab. Node names (`srv`, `sw`, `c1`..`c4`) map to namespaces `PREFIX-node`.
pub struct Lab {
    prefix: String,
    cap_mbit: u32,
    namespaces: Vec<String>,
    pids: std::sync::Mutex<Vec<u32>>,
    macs: Vec<String>,
    stop: Arc<AtomicBool>,
    start: Instant,
    ipv6: bool,
    ports: &'static [&'static str],
    clients: &'static [&'static str],
}

impl Lab {
    /// Builds the whole topology with a per-port cap of `cap_mbit` Mbit/s toward the server.
    pub fn build(cap_mbit: u32) -> LabResult<Lab> {
        Self::build_with(cap_mbit, LabOptions::default())
    }

    /// [`Lab::build`] with options (IPv6).
    pub fn build_with(cap_mbit: u32, opts: LabOptions) -> LabResult<Lab> {
        Self::build_sized(cap_mbit, PORTS.len(), CLIENTS.len(), opts)
    }

    /// A lab with `ports` server ports (`p0`.., at most 8) and `clients` clients (`c1`.., at
    /// most 16), each port capped at `cap_mbit`; client `cN` starts on port `(N-1) % ports`.
    pub fn build_sized(
        cap_mbit: u32,
        ports: usize,
        clients: usize,
        opts: LabOptions,
    ) -> LabResult<Lab> {
        if !(1..=ALL_PORTS.len()).contains(&ports) {
            return Err(format!(
                "a lab has 1 to {} ports, not {ports}",
                ALL_PORTS.len()
            ));
        }
        if !(1..=ALL_CLIENTS.len()).contains(&clients) {
            return Err(format!(
                "a lab has 1 to {} clients, not {clients}",
                ALL_CLIENTS.len()
            ));
        }
        if !is_root() {
            return Err("the namespace lab needs root (it creates network namespaces)".into());
        }
        if cap_mbit == 0 {
            return Err("the per-port cap must be at least 1 Mbit/s".into());
        }
        check_tools()?;
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let mut lab = Lab {
            prefix: format!("rlbd-{}-{serial}", std::process::id()),
            cap_mbit,
            namespaces: Vec::new(),
            pids: std::sync::Mutex::new(Vec::new()),
            macs: Vec::new(),
            stop: stop_flag(),
            start: Instant::now(),
            ipv6: opts.ipv6,
            ports: &ALL_PORTS[..ports],
            clients: &ALL_CLIENTS[..clients],
        };
        // On error `lab` is dropped here, which deletes whatever was made.
        lab.create()?;
        Ok(lab)
    }

    /// The namespace name of a node (`srv`, `sw`, `c1`..).
    pub fn ns(&self, node: &str) -> String {
        format!("{}-{node}", self.prefix)
    }

    /// The unique prefix of every namespace of this lab.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The per-port cap in Mbit/s.
    pub fn cap_mbit(&self) -> u32 {
        self.cap_mbit
    }

    /// The server's ports, in order.
    pub fn ports(&self) -> &'static [&'static str] {
        self.ports
    }

    /// The clients, in order.
    pub fn clients(&self) -> &'static [&'static str] {
        self.clients
    }

    /// Seconds since the lab was built (the time base of samples and events).
    pub fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// The instant the lab was built.
    pub fn started(&self) -> Instant {
        self.start
    }

    /// `ip -n NS args...`
    pub fn ip(&self, node: &str, args: &[&str]) -> LabResult<String> {
        let ns = self.ns(node);
        let mut all = vec!["ip", "-n", &ns];
        all.extend_from_slice(args);
        run_cmd(&all)
    }

    /// Runs a command inside a node's namespace and returns its stdout.
    pub fn exec_in(&self, node: &str, args: &[&str]) -> LabResult<String> {
        let ns = self.ns(node);
        let mut all = vec!["ip", "netns", "exec", &ns];
        all.extend_from_slice(args);
        run_cmd(&all)
    }

    /// The MAC of a server port.
    pub fn port_mac(&self, port: &str) -> LabResult<String> {
        let out = self.exec_in("srv", &["cat", &format!("/sys/class/net/{port}/address")])?;
        Ok(out.trim().to_string())
    }

    /// Sets a server port up or down.
    pub fn set_port(&self, port: &str, up: bool) -> LabResult<()> {
        let state = if up { "up" } else { "down" };
        self.ip("srv", &["link", "set", port, state]).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients() {
        assert_eq!(client_ip("c3").unwrap(), "198.18.0.13");
        assert_eq!(client_ip("c16").unwrap(), "198.18.0.26");
        assert!(client_ip("c17").is_err());
        assert_eq!(initial_port("c4"), "p1");
        assert_eq!(initial_port("c3"), "p0");
        assert_eq!(initial_port_of("c6", 4), "p1");
        assert_eq!(initial_port_of("c4", 4), "p3");
    }
}
