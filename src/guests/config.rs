//! The `[guests]` section: whether rlbd balances the guests behind the bond (VMs and containers
//! on a bridge whose port is the bond), which bridges, and the guests an operator pins to a port
//! or leaves alone.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Mac;

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GuestsConfig {
    /// Off by default in this first release: it changes the host's transmit path (a guest's
    /// frames leave through its slave, redirected at the bond's egress) and puts the slaves in
    /// promiscuous mode (docs/operations.md, "Hypervisor hosts").
    pub enabled: bool,
    /// The bridges over the bond whose guests are balanced, by name; empty: every one.
    pub bridges: Vec<String>,
    /// Guests left to the kernel as if rlbd did not run: never pinned, never moved.
    pub exclude: Vec<String>,
    /// Guests kept on a port: MAC -> port name. Failed over when the port goes down and brought
    /// back when it returns; never moved by the balancing rules.
    pub pin: BTreeMap<String, String>,
}

impl GuestsConfig {
    /// The first bad entry as (key, message).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for m in &self.exclude {
            parse_mac(m).map_err(|e| ("exclude", e))?;
        }
        for (m, port) in &self.pin {
            let mac = parse_mac(m).map_err(|e| ("pin", e))?;
            if self.exclude.iter().any(|x| parse_mac(x) == Ok(mac)) {
                return Err(("pin", format!("guest {m} is both pinned and excluded")));
            }
            if port.is_empty() || port.len() > 15 || port.contains(['/', ' ']) {
                return Err((
                    "pin",
                    format!("guest {m}: {port:?} is not an interface name"),
                ));
            }
        }
        for b in &self.bridges {
            if b.is_empty() || b.len() > 15 || b.contains(['/', ' ']) {
                return Err(("bridges", format!("{b:?} is not an interface name")));
            }
        }
        Ok(())
    }

    /// Whether `mac` is excluded (entries that do not parse were refused by `validate`).
    pub fn excludes(&self, mac: Mac) -> bool {
        self.exclude.iter().any(|m| parse_mac(m) == Ok(mac))
    }

    /// The port `mac` is pinned to, by name.
    pub fn pinned_to(&self, mac: Mac) -> Option<&str> {
        self.pin
            .iter()
            .find(|(m, _)| parse_mac(m) == Ok(mac))
            .map(|(_, p)| p.as_str())
    }

    /// Whether the guests of bridge `name` are balanced.
    pub fn covers_bridge(&self, name: &str) -> bool {
        self.bridges.is_empty() || self.bridges.iter().any(|b| b == name)
    }
}

/// A guest's MAC as the configuration writes it (`02:00:00:00:00:51`): a unicast address.
pub fn parse_mac(s: &str) -> Result<Mac, String> {
    let mac: Mac = s
        .parse()
        .map_err(|_| format!("{s:?} is not a MAC address (six hex octets, colon-separated)"))?;
    if mac.0 & 1 == 1 || mac == Mac::zero() {
        return Err(format!("{s} is not a unicast MAC address"));
    }
    Ok(mac)
}
