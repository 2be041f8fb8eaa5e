//! Neighbour tables filled in bulk for the fault tests: thousands of changes to the server's
//! table at once (`ip -batch`), which overflow the daemon's netlink socket or queue ahead of a
//! port's going down.

use std::process::Command;

use rlbd_lab::netns::{Lab, LabResult};

use super::daemon::tmp;

/// Runs `lines` as one `ip -batch` in the server's namespace.
pub fn batch(lab: &Lab, lines: &[String]) -> LabResult<()> {
    let path = tmp(&format!("{}-batch.txt", lab.prefix()));
    std::fs::write(&path, lines.join("\n") + "\n").map_err(|e| e.to_string())?;
    let out = Command::new("ip")
        .args(["-n", &lab.ns("srv"), "-batch"])
        .arg(&path)
        .output()
        .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&path);
    if !out.status.success() {
        return Err(format!(
            "ip -batch failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// `ip` commands adding or deleting (`verb`) permanent neighbours 198.19.x.y on p0, one a
/// number of `range`.
pub fn neigh_lines(verb: &str, range: std::ops::Range<u32>) -> Vec<String> {
    range
        .map(|i| {
            let (a, b) = (i / 250, i % 250 + 1);
            let mac = format!(
                "02:77:00:{:02x}:{:02x}:{:02x}",
                i >> 16,
                (i >> 8) & 255,
                i & 255
            );
            match verb {
                "add" => format!("neigh add 198.19.{a}.{b} lladdr {mac} dev p0 nud permanent"),
                _ => format!("neigh del 198.19.{a}.{b} dev p0"),
            }
        })
        .collect()
}
