//! Building the topology: namespaces, the switch, the server's capped ports, the clients; and
//! capping what a client sends.

use std::process::{Command, Stdio};

use super::{
    client_ip, client_ip6, initial_port_of, run_cmd, Lab, LabResult, SERVER_IP, SERVER_IP6,
};

impl Lab {
    /// Every namespace, then the switch and the server's ports, then the clients, each placed on
    /// its initial port.
    pub(super) fn create(&mut self) -> LabResult<()> {
        let mut nodes = vec!["srv", "sw"];
        nodes.extend(self.clients);
        for node in nodes {
            self.add_node(node)?;
        }
        let sw = self.ns("sw");
        self.ip("sw", &["link", "add", "br0", "type", "bridge"])?;
        self.ip("sw", &["link", "set", "br0", "up"])?;
        let burst = tbf_burst_bytes(self.cap_mbit, kernel_hz());
        for (i, port) in self.ports.iter().enumerate() {
            self.add_port(&sw, i, port, burst)?;
        }
        for key in ["all", "default"].iter().chain(self.ports) {
            self.sysctl("srv", &format!("net/ipv4/conf/{key}/rp_filter"), "0")?;
        }
        for (i, client) in self.clients.iter().enumerate() {
            let mac = format!("02:00:c6:12:00:{:02x}", i + 1);
            self.add_client(client, &mac)?;
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

    /// A namespace with loopback up and IPv6 either off or quiet.
    fn add_node(&mut self, node: &str) -> LabResult<()> {
        let ns = self.ns(node);
        run_cmd(&["ip", "netns", "add", &ns])?;
        self.namespaces.push(ns);
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
        Ok(())
    }

    /// Server port `i`: a veth into the switch with the server's addresses, capped by tbf on the
    /// switch side.
    fn add_port(&self, sw: &str, i: usize, port: &str, burst: u64) -> LabResult<()> {
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
            "tc", "-n", sw, "qdisc", "replace", "dev", &swp, "root", "tbf", "rate", &rate, "burst",
            &burst, "latency", "50ms",
        ])?;
        // The switch knows where each server port is even before the port sends a frame,
        // so nothing meant for p1 is ever flooded into p0's counters.
        run_cmd(&[
            "bridge", "-n", sw, "fdb", "replace", &mac, "dev", &swp, "master", "static",
        ])?;
        Ok(())
    }

    /// A client with its addresses, and the server's permanent entries for it.
    fn add_client(&self, client: &str, mac: &str) -> LabResult<()> {
        self.veth(client, "eth0", mac, &format!("s-{client}"))?;
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
                    mac,
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
                        mac,
                        "dev",
                        port,
                        "nud",
                        "permanent",
                    ],
                )?;
            }
        }
        Ok(())
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

    fn sysctl(&self, node: &str, key: &str, value: &str) -> LabResult<()> {
        // /proc/sys/net shows the namespace of the process that opens it.
        let script = format!("echo {value} > /proc/sys/{key}");
        self.exec_in(node, &["sh", "-c", &script]).map(|_| ())
    }
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
}
