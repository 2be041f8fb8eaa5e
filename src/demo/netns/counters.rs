//! What the server received: per-port byte counters and per-client bytes of the sink's
//! connections.

use super::{client_ip, run_cmd, Lab, LabResult, SINK_PORT};

impl Lab {
    /// Bytes received so far by a server port.
    pub fn rx_bytes(&self, port: &str) -> LabResult<u64> {
        Ok(self.rx_bytes_all(&[port])?[0])
    }

    /// Bytes received so far by each of `ports`, read in one go.
    pub fn rx_bytes_all(&self, ports: &[&str]) -> LabResult<Vec<u64>> {
        read_rx_bytes(&self.ns("srv"), ports)
    }

    /// Bytes the server has received on established connections from `client` (sum over its
    /// connections to the sink, from `ss`).
    pub fn bytes_from(&self, client: &str) -> LabResult<u64> {
        let out = self.exec_in("srv", &["ss", "-Htin", "-O", "state", "established"])?;
        let ip = client_ip(client)?;
        Ok(sum_bytes_received(&out, &ip, SINK_PORT))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ss_sum() {
        let out = "0 0 198.18.0.1:5001 198.18.0.11:40000 cubic bytes_received:100 x\n\
                   0 0 198.18.0.1:5001 198.18.0.11:40002 cubic bytes_received:50\n\
                   0 0 198.18.0.1:5001 198.18.0.13:40000 cubic bytes_received:7\n";
        assert_eq!(sum_bytes_received(out, "198.18.0.11", 5001), 150);
        assert_eq!(sum_bytes_received(out, "198.18.0.1", 5001), 0);
    }
}
