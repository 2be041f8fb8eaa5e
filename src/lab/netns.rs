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

use std::io;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

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
static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// The flag set by SIGINT/SIGTERM (a second signal exits at once). Registered once per process.
pub fn stop_flag() -> Arc<AtomicBool> {
    STOP.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // Order matters: the first signal only sets the flag, a second one exits.
            let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&flag));
            let _ = signal_hook::flag::register(sig, Arc::clone(&flag));
        }
        flag
    })
    .clone()
}

/// Whether this process runs as root (the lab needs CAP_NET_ADMIN and CAP_SYS_ADMIN).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Checks that the iproute2 tools the lab runs are installed.
pub fn check_tools() -> LabResult<()> {
    for tool in ["ip", "tc", "bridge"] {
        match Command::new(tool).arg("-V").output() {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(format!(
                    "`{tool}` not found: the namespace lab needs iproute2 \
                     (Debian/Ubuntu: apt-get install iproute2; Fedora: dnf install iproute iproute-tc)"
                ))
            }
            Err(e) => return Err(format!("cannot run `{tool}`: {e}")),
        }
    }
    Ok(())
}

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

/// Runs a command and returns its stdout, or an error carrying its stderr.
pub fn run_cmd(args: &[&str]) -> LabResult<String> {
    let out = output(args)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`{}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn output(args: &[&str]) -> LabResult<Output> {
    Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `{}`: {e}", args.join(" ")))
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

    fn create(&mut self) -> LabResult<()> {
        let mut nodes = vec!["srv", "sw"];
        nodes.extend(self.clients);
        for node in nodes {
            let ns = self.ns(node);
            run_cmd(&["ip", "netns", "add", &ns])?;
            self.namespaces.push(ns.clone());
            self.check_stop()?;
            self.ip(node, &["link", "set", "lo", "up"])?;
            for key in ["all", "default"] {
                if self.ipv6 && node != "sw" {
                    // IPv6 on, with as little chatter as it takes: no DAD, no router
                    // solicitations, no autoconfiguration.
                    for (k, v) in [
                        ("accept_dad", "0"),
                        ("accept_ra", "0"),
                        ("router_solicitations", "0"),
                        ("autoconf", "0"),
                    ] {
                        self.sysctl(node, &format!("net/ipv6/conf/{key}/{k}"), v)?;
                    }
                } else {
                    // No IPv6 chatter (DAD, MLD, router solicitations) in the rx counters.
                    self.sysctl(node, &format!("net/ipv6/conf/{key}/disable_ipv6"), "1")?;
                }
            }
        }
        let sw = self.ns("sw");
        self.ip("sw", &["link", "add", "br0", "type", "bridge"])?;
        self.ip("sw", &["link", "set", "br0", "up"])?;
        let burst = tbf_burst_bytes(self.cap_mbit, kernel_hz());
        for (i, port) in self.ports.iter().enumerate() {
            let swp = format!("s-{port}");
            let mac = format!("02:00:c6:12:01:{i:02x}");
            self.veth("srv", port, &mac, &swp)?;
            self.ip(
                "srv",
                &["addr", "add", &format!("{SERVER_IP}/24"), "dev", port],
            )?;
            if self.ipv6 {
                self.ip(
                    "srv",
                    &[
                        "-6",
                        "addr",
                        "add",
                        &format!("{SERVER_IP6}/64"),
                        "dev",
                        port,
                        "nodad",
                    ],
                )?;
            }
            self.ip("srv", &["link", "set", port, "up"])?;
            let rate = format!("{}mbit", self.cap_mbit);
            let burst = burst.to_string();
            run_cmd(&[
                "tc", "-n", &sw, "qdisc", "replace", "dev", &swp, "root", "tbf", "rate", &rate,
                "burst", &burst, "latency", "50ms",
            ])?;
            // The switch knows where each server port is even before the port sends a frame,
            // so nothing meant for p1 is ever flooded into p0's counters.
            run_cmd(&[
                "bridge", "-n", &sw, "fdb", "replace", &mac, "dev", &swp, "master", "static",
            ])?;
        }
        for key in ["all", "default"].iter().chain(self.ports) {
            self.sysctl("srv", &format!("net/ipv4/conf/{key}/rp_filter"), "0")?;
        }
        for (i, client) in self.clients.iter().enumerate() {
            let mac = format!("02:00:c6:12:00:{:02x}", i + 1);
            self.veth(client, "eth0", &mac, &format!("s-{client}"))?;
            let ip = client_ip(client)?;
            self.ip(client, &["addr", "add", &format!("{ip}/24"), "dev", "eth0"])?;
            if self.ipv6 {
                let ip6 = format!("{}/64", client_ip6(client)?);
                self.ip(client, &["-6", "addr", "add", &ip6, "dev", "eth0", "nodad"])?;
            }
            self.ip(client, &["link", "set", "eth0", "up"])?;
            // The server never ARPs for a client: a broadcast ARP request from one server port
            // would point every client that hears it at that port and undo the placement.
            for port in self.ports {
                self.ip(
                    "srv",
                    &[
                        "neigh",
                        "replace",
                        &ip,
                        "lladdr",
                        &mac,
                        "dev",
                        port,
                        "nud",
                        "permanent",
                    ],
                )?;
                // Nor solicits one over IPv6, for the same reason.
                if self.ipv6 {
                    let ip6 = client_ip6(client)?;
                    self.ip(
                        "srv",
                        &[
                            "-6",
                            "neigh",
                            "replace",
                            &ip6,
                            "lladdr",
                            &mac,
                            "dev",
                            port,
                            "nud",
                            "permanent",
                        ],
                    )?;
                }
            }
        }
        self.macs = self
            .ports
            .iter()
            .map(|p| self.port_mac(p))
            .collect::<LabResult<_>>()?;
        for client in self.clients {
            self.place(client, initial_port_of(client, self.ports.len()))?;
        }
        Ok(())
    }

    /// Makes a veth pair: `inner` (with `mac`) in `node`, `outer` in the switch on br0.
    fn veth(&self, node: &str, inner: &str, mac: &str, outer: &str) -> LabResult<()> {
        let ns = self.ns(node);
        self.ip(
            "sw",
            &[
                "link", "add", outer, "type", "veth", "peer", "name", inner, "address", mac,
                "netns", &ns,
            ],
        )?;
        self.ip("sw", &["link", "set", outer, "master", "br0", "up"])?;
        Ok(())
    }

    /// Points `client`'s neighbour entry for the server at `port`'s MAC (a dynamic, reachable
    /// entry: later ARP traffic may change it, as it would one learnt from the wire), and reads it
    /// back.
    pub fn place(&self, client: &str, port: &str) -> LabResult<()> {
        let mac = self.port_mac(port)?;
        self.ip(
            client,
            &[
                "neigh",
                "replace",
                SERVER_IP,
                "lladdr",
                &mac,
                "dev",
                "eth0",
                "nud",
                "reachable",
            ],
        )?;
        match self.neigh_mac(client)? {
            Some(got) if got == mac => {}
            got => {
                return Err(format!(
                    "placing {client} on {port}: its entry for {SERVER_IP} reads {got:?}, not {mac}"
                ))
            }
        }
        if !self.ipv6 {
            return Ok(());
        }
        self.ip(
            client,
            &[
                "-6",
                "neigh",
                "replace",
                SERVER_IP6,
                "lladdr",
                &mac,
                "dev",
                "eth0",
                "nud",
                "reachable",
            ],
        )?;
        match self.neigh6_mac(client)? {
            Some(got) if got == mac => Ok(()),
            got => Err(format!(
                "placing {client} on {port}: its entry for {SERVER_IP6} reads {got:?}, not {mac}"
            )),
        }
    }

    /// The MAC `client` currently uses for the server's IPv6 address, if it has an entry.
    pub fn neigh6_mac(&self, client: &str) -> LabResult<Option<String>> {
        let out = self.ip(client, &["-6", "neigh", "show", SERVER_IP6, "dev", "eth0"])?;
        Ok(parse_lladdr(&out))
    }

    /// The port whose MAC `client` uses for the server's IPv6 address now.
    pub fn client_port6(&self, client: &str) -> LabResult<Option<&'static str>> {
        Ok(self.port_with_mac(self.neigh6_mac(client)?))
    }

    /// Deletes `client`'s IPv6 neighbour entry for the server.
    pub fn flush_neigh6(&self, client: &str) -> LabResult<()> {
        self.ip(client, &["-6", "neigh", "flush", SERVER_IP6, "dev", "eth0"])
            .map(|_| ())
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

    /// Caps what `client` sends at `mbit` Mbit/s (`tc tbf` on its egress): its demand, as a
    /// rate-limited application would have one. `None` removes the cap.
    pub fn cap_client(&self, client: &str, mbit: Option<f64>) -> LabResult<()> {
        let ns = self.ns(client);
        let Some(mbit) = mbit else {
            // Deleting a root qdisc that is not there fails; nothing to undo then.
            let _ = run_cmd(&["tc", "-n", &ns, "qdisc", "del", "dev", "eth0", "root"]);
            return Ok(());
        };
        if !(mbit.is_finite() && mbit > 0.0) {
            return Err(format!("cap for {client}: {mbit} is not a positive rate"));
        }
        let kbit = (mbit * 1000.0).round().max(1.0) as u64;
        let burst = tbf_burst_bytes(mbit.ceil() as u32, kernel_hz()).to_string();
        run_cmd(&[
            "tc",
            "-n",
            &ns,
            "qdisc",
            "replace",
            "dev",
            "eth0",
            "root",
            "tbf",
            "rate",
            &format!("{kbit}kbit"),
            "burst",
            &burst,
            "latency",
            "50ms",
        ])
        .map(|_| ())
    }

    /// Pins `client`'s neighbour entry for the server to `port`'s MAC (`nud permanent`): no ARP
    /// changes it, rlbd's updates included. The control runs of a placement use this; `place`
    /// makes the entry dynamic again.
    pub fn pin(&self, client: &str, port: &str) -> LabResult<()> {
        let mac = self.port_mac(port)?;
        self.ip(
            client,
            &[
                "neigh",
                "replace",
                SERVER_IP,
                "lladdr",
                &mac,
                "dev",
                "eth0",
                "nud",
                "permanent",
            ],
        )?;
        match self.neigh_mac(client)? {
            Some(got) if got == mac => Ok(()),
            got => Err(format!(
                "pinning {client} on {port}: its entry for {SERVER_IP} reads {got:?}, not {mac}"
            )),
        }
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

    /// Starts a command inside a node's namespace (stdin null, stdout piped, stderr inherited;
    /// adjust with [`Lab::spawn_with`]). Every process in the lab's namespaces is killed on
    /// teardown.
    pub fn spawn_in(&self, node: &str, args: &[&str]) -> LabResult<Child> {
        self.spawn_with(node, args, Stdio::piped(), Stdio::inherit())
    }

    /// [`Lab::spawn_in`] with chosen stdout and stderr.
    pub fn spawn_with(
        &self,
        node: &str,
        args: &[&str],
        stdout: Stdio,
        stderr: Stdio,
    ) -> LabResult<Child> {
        let ns = self.ns(node);
        // `ip netns exec` execs the command itself, so the child's pid is the command's.
        let child = Command::new("ip")
            .args(["netns", "exec", &ns])
            .args(args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start `{}` in {ns}: {e}", args.join(" ")))?;
        self.pids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(child.id());
        Ok(child)
    }

    fn sysctl(&self, node: &str, key: &str, value: &str) -> LabResult<()> {
        // /proc/sys/net shows the namespace of the process that opens it.
        let script = format!("echo {value} > /proc/sys/{key}");
        self.exec_in(node, &["sh", "-c", &script]).map(|_| ())
    }

    /// Bytes received so far by a server port.
    pub fn rx_bytes(&self, port: &str) -> LabResult<u64> {
        Ok(self.rx_bytes_all(&[port])?[0])
    }

    /// Bytes received so far by each of `ports`, read in one go.
    pub fn rx_bytes_all(&self, ports: &[&str]) -> LabResult<Vec<u64>> {
        read_rx_bytes(&self.ns("srv"), ports)
    }

    /// The MAC `client` currently uses for the server's address, if it has an entry.
    pub fn neigh_mac(&self, client: &str) -> LabResult<Option<String>> {
        let out = self.ip(client, &["-4", "neigh", "show", SERVER_IP, "dev", "eth0"])?;
        Ok(parse_lladdr(&out))
    }

    /// The MAC of a server port.
    pub fn port_mac(&self, port: &str) -> LabResult<String> {
        let out = self.exec_in("srv", &["cat", &format!("/sys/class/net/{port}/address")])?;
        Ok(out.trim().to_string())
    }

    /// The port whose MAC `client` uses now (`None` without an entry or for a foreign MAC;
    /// port MACs as read when the lab was built).
    pub fn client_port(&self, client: &str) -> LabResult<Option<&'static str>> {
        Ok(self.port_with_mac(self.neigh_mac(client)?))
    }

    /// The server port whose MAC (as read when the lab was built) is `mac`.
    fn port_with_mac(&self, mac: Option<String>) -> Option<&'static str> {
        let mac = mac?;
        self.ports
            .iter()
            .zip(&self.macs)
            .find(|(_, m)| **m == mac)
            .map(|(p, _)| *p)
    }

    /// Deletes `client`'s neighbour entry for the server, so its next packet re-ARPs.
    pub fn flush_neigh(&self, client: &str) -> LabResult<()> {
        self.ip(client, &["neigh", "flush", SERVER_IP, "dev", "eth0"])
            .map(|_| ())
    }

    /// Sets a server port up or down.
    pub fn set_port(&self, port: &str, up: bool) -> LabResult<()> {
        let state = if up { "up" } else { "down" };
        self.ip("srv", &["link", "set", port, state]).map(|_| ())
    }

    /// Bytes the server has received on established connections from `client` (sum over its
    /// connections to the sink, from `ss`).
    pub fn bytes_from(&self, client: &str) -> LabResult<u64> {
        let out = self.exec_in("srv", &["ss", "-Htin", "-O", "state", "established"])?;
        let ip = client_ip(client)?;
        Ok(sum_bytes_received(&out, &ip, SINK_PORT))
    }

    /// Fails if Ctrl-C or SIGTERM arrived.
    pub fn check_stop(&self) -> LabResult<()> {
        if self.stop.load(Ordering::Relaxed) {
            Err("interrupted: tearing the lab down".into())
        } else {
            Ok(())
        }
    }

    /// Sleeps, waking early (with an error) on Ctrl-C or SIGTERM.
    pub fn sleep(&self, d: Duration) -> LabResult<()> {
        let end = Instant::now() + d;
        loop {
            self.check_stop()?;
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
    }

    /// Waits for a child to exit, for at most `timeout`; `Ok(None)` if it is still running.
    pub fn wait_child(
        &self,
        child: &mut Child,
        timeout: Duration,
    ) -> LabResult<Option<std::process::ExitStatus>> {
        let end = Instant::now() + timeout;
        loop {
            if let Some(st) = child.try_wait().map_err(|e| format!("wait: {e}"))? {
                return Ok(Some(st));
            }
            if Instant::now() >= end {
                return Ok(None);
            }
            self.sleep(Duration::from_millis(50))?;
        }
    }

    /// Sends SIGTERM, waits up to `grace`, then SIGKILLs; returns the exit status.
    pub fn stop_child(
        &self,
        child: &mut Child,
        grace: Duration,
    ) -> LabResult<std::process::ExitStatus> {
        if let Some(st) = child.try_wait().map_err(|e| format!("wait: {e}"))? {
            return Ok(st);
        }
        signal(child.id(), libc::SIGTERM);
        let end = Instant::now() + grace;
        while Instant::now() < end {
            if let Some(st) = child.try_wait().map_err(|e| format!("wait: {e}"))? {
                return Ok(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        child.wait().map_err(|e| format!("wait: {e}"))
    }

    /// Kills every process in the lab's namespaces and deletes the namespaces. Idempotent;
    /// returns the errors it met (it always tries every step).
    pub fn teardown(&mut self) -> Vec<String> {
        let mut errors = Vec::new();
        let mut pids: Vec<u32> =
            std::mem::take(&mut *self.pids.lock().unwrap_or_else(|e| e.into_inner()));
        for ns in &self.namespaces {
            if let Ok(out) = run_cmd(&["ip", "netns", "pids", ns]) {
                pids.extend(out.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
            }
        }
        pids.sort_unstable();
        pids.dedup();
        // Only processes still inside one of our namespaces are signalled (a recorded pid may
        // have exited and been reused).
        let ours: Vec<u32> = pids.into_iter().filter(|p| self.in_our_ns(*p)).collect();
        for &pid in &ours {
            signal(pid, libc::SIGTERM);
        }
        let end = Instant::now() + Duration::from_millis(1500);
        while Instant::now() < end && ours.iter().any(|p| self.in_our_ns(*p)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        for &pid in &ours {
            if self.in_our_ns(pid) {
                signal(pid, libc::SIGKILL);
            }
        }
        for ns in self.namespaces.drain(..).rev() {
            if let Err(e) = run_cmd(&["ip", "netns", "del", &ns]) {
                errors.push(e);
            }
        }
        errors
    }

    fn in_our_ns(&self, pid: u32) -> bool {
        run_cmd(&["ip", "netns", "identify", &pid.to_string()])
            .map(|out| {
                out.split_whitespace()
                    .any(|n| self.namespaces.iter().any(|ns| ns == n))
            })
            .unwrap_or(false)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for e in self.teardown() {
            eprintln!("rlbd lab teardown: {e}");
        }
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill has no memory-safety preconditions; pid > 0 names one process.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// Reads `/sys/class/net/PORT/statistics/rx_bytes` of each port inside namespace `ns`.
pub fn read_rx_bytes(ns: &str, ports: &[&str]) -> LabResult<Vec<u64>> {
    let files: Vec<String> = ports
        .iter()
        .map(|p| format!("/sys/class/net/{p}/statistics/rx_bytes"))
        .collect();
    let mut args = vec!["ip", "netns", "exec", ns, "cat"];
    args.extend(files.iter().map(String::as_str));
    let out = run_cmd(&args)?;
    let vals: Vec<u64> = out
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    if vals.len() != ports.len() {
        return Err(format!(
            "reading rx_bytes of {ports:?} in {ns}: got {out:?}"
        ));
    }
    Ok(vals)
}

/// The `lladdr` of the first line of `ip neigh show` output, if any.
pub fn parse_lladdr(out: &str) -> Option<String> {
    let mut words = out.split_whitespace();
    while let Some(w) = words.next() {
        if w == "lladdr" {
            return words.next().map(|m| m.to_ascii_lowercase());
        }
    }
    None
}

/// Sums `bytes_received` of `ss -tinO` lines whose local port is `port` and peer is `ip`.
pub fn sum_bytes_received(ss_out: &str, ip: &str, port: u16) -> u64 {
    let local = format!(":{port}");
    let peer = format!("{ip}:");
    ss_out
        .lines()
        .filter(|l| {
            let mut w = l.split_whitespace();
            // state is omitted with a state filter: Recv-Q Send-Q Local Peer ...
            let (_, _, loc, pe) = (w.next(), w.next(), w.next(), w.next());
            loc.is_some_and(|a| a.ends_with(&local)) && pe.is_some_and(|a| a.starts_with(&peer))
        })
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("bytes_received:"))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .sum()
}

/// The kernel's HZ from its config, or 100 (the lowest, hence safest for the burst) if unknown.
pub fn kernel_hz() -> u32 {
    let from_text = |t: &str| {
        t.lines().find_map(|l| {
            l.strip_prefix("CONFIG_HZ=")
                .and_then(|v| v.trim().parse().ok())
        })
    };
    if let Ok(out) = Command::new("zcat")
        .arg("/proc/config.gz")
        .stderr(Stdio::null())
        .output()
    {
        if let Some(hz) = from_text(&String::from_utf8_lossy(&out.stdout)) {
            return hz;
        }
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    std::fs::read_to_string(format!("/boot/config-{}", release.trim()))
        .ok()
        .and_then(|t| from_text(&t))
        .unwrap_or(100)
}

/// A tbf burst (bytes) of at least 64 KiB and at least rate/HZ, the bytes one timer tick must
/// release for the rate to be reachable.
pub fn tbf_burst_bytes(cap_mbit: u32, hz: u32) -> u64 {
    let per_tick = u64::from(cap_mbit) * 1_000_000 / 8 / u64::from(hz.max(1));
    per_tick.max(64 * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_rule() {
        assert_eq!(tbf_burst_bytes(100, 250), 65536);
        assert_eq!(tbf_burst_bytes(1000, 250), 500_000);
        assert_eq!(tbf_burst_bytes(100, 100), 125_000);
    }

    #[test]
    fn lladdr() {
        let out = "198.18.0.1 lladdr 02:00:C6:12:01:00 REACHABLE\n";
        assert_eq!(parse_lladdr(out).as_deref(), Some("02:00:c6:12:01:00"));
        assert_eq!(parse_lladdr("198.18.0.1  FAILED\n"), None);
    }

    #[test]
    fn ss_sum() {
        let out = "0 0 198.18.0.1:5001 198.18.0.11:40000 cubic bytes_received:100 x\n\
                   0 0 198.18.0.1:5001 198.18.0.11:40002 cubic bytes_received:50\n\
                   0 0 198.18.0.1:5001 198.18.0.13:40000 cubic bytes_received:7\n";
        assert_eq!(sum_bytes_received(out, "198.18.0.11", 5001), 150);
        assert_eq!(sum_bytes_received(out, "198.18.0.1", 5001), 0);
    }

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
