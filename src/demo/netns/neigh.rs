//! Where each client sends: its neighbour entry for the server, set (placement) and read back.

use super::{Lab, LabResult, SERVER_IP, SERVER_IP6};

impl Lab {
    /// Points `client`'s neighbour entries for the server (IPv4, and IPv6 in an IPv6 lab) at
    /// `port`'s MAC (dynamic, reachable entries: later ARP or ND traffic may change them, as it
    /// would ones learnt from the wire), and reads them back.
    pub fn place(&self, client: &str, port: &str) -> LabResult<()> {
        self.place_family(client, port, false)?;
        if self.ipv6 {
            self.place_family(client, port, true)?;
        }
        Ok(())
    }

    /// [`place`](Self::place) for one family's entry only (`v6`), the other left as it is.
    pub fn place_family(&self, client: &str, port: &str, v6: bool) -> LabResult<()> {
        let mac = self.port_mac(port)?;
        let (family, server) = if v6 {
            ("-6", SERVER_IP6)
        } else {
            ("-4", SERVER_IP)
        };
        let args = [
            family,
            "neigh",
            "replace",
            server,
            "lladdr",
            &mac,
            "dev",
            "eth0",
            "nud",
            "reachable",
        ];
        self.ip(client, &args)?;
        let got = if v6 {
            self.neigh6_mac(client)?
        } else {
            self.neigh_mac(client)?
        };
        match got {
            Some(got) if got == mac => Ok(()),
            got => Err(format!(
                "placing {client} on {port}: its entry for {server} reads {got:?}, not {mac}"
            )),
        }
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

    /// The MAC `client` currently uses for the server's address, if it has an entry.
    pub fn neigh_mac(&self, client: &str) -> LabResult<Option<String>> {
        let out = self.ip(client, &["-4", "neigh", "show", SERVER_IP, "dev", "eth0"])?;
        Ok(parse_lladdr(&out))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lladdr() {
        let out = "198.18.0.1 lladdr 02:00:C6:12:01:00 REACHABLE\n";
        assert_eq!(parse_lladdr(out).as_deref(), Some("02:00:c6:12:01:00"));
        assert_eq!(parse_lladdr("198.18.0.1  FAILED\n"), None);
    }
}
