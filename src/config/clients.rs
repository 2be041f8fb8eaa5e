//! The `[clients]` section: clients rlbd never moves (`exclude`: a gateway, a VRRP peer) and
//! clients it keeps on a chosen port (`pin`: a backup server, a latency-sensitive client). An
//! entry is an IPv4 or IPv6 address or prefix (a client matches by the address it uses) or a
//! MAC (a client matches on any VLAN).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use ipnetwork::IpNetwork;
use serde::{Deserialize, Serialize};

use crate::Mac;

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientsConfig {
    /// Never moved, never sent an update; still counted and shown.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Entry -> port name: placed there, re-asserted, failed over and brought back.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pin: BTreeMap<String, String>,
    /// Where each entry is written (`file:line`), for the errors only the ports can tell.
    #[serde(skip)]
    pub places: BTreeMap<String, String>,
}

/// What one entry matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientMatch {
    Mac(Mac),
    Net(IpNetwork),
}

impl ClientMatch {
    pub fn parse(s: &str) -> Result<ClientMatch, String> {
        let s = s.trim();
        if let Ok(net) = s.parse::<IpNetwork>() {
            if net.network() != net.ip() {
                return Err(format!(
                    "{s:?} has host bits set; the prefix is {}/{}",
                    net.network(),
                    net.prefix()
                ));
            }
            return Ok(ClientMatch::Net(net));
        }
        match s.parse::<Mac>() {
            Ok(mac) if mac.0 & 1 == 0 && mac != Mac::zero() => Ok(ClientMatch::Mac(mac)),
            Ok(_) => Err(format!("{s} is not a unicast MAC address")),
            Err(_) => Err(format!(
                "{s:?} is not an IP address, a prefix (10.0.0.0/24) or a MAC (02:00:00:00:00:07)"
            )),
        }
    }

    /// Whether a client with `mac`, using `addrs`, is this entry's.
    pub fn matches<I: IntoIterator<Item = IpAddr>>(&self, mac: Mac, addrs: I) -> bool {
        match self {
            ClientMatch::Mac(m) => *m == mac,
            ClientMatch::Net(n) => addrs.into_iter().any(|a| n.contains(a)),
        }
    }

    /// Whether some client could match both entries (same MAC, or prefixes that overlap).
    fn overlaps(&self, other: &ClientMatch) -> bool {
        match (self, other) {
            (ClientMatch::Mac(a), ClientMatch::Mac(b)) => a == b,
            (ClientMatch::Net(a), ClientMatch::Net(b)) => {
                a.contains(b.network()) || b.contains(a.network())
            }
            _ => false,
        }
    }

    /// How narrowly it matches: a MAC names one client, a longer prefix fewer.
    fn specificity(&self) -> u16 {
        match self {
            ClientMatch::Mac(_) => 1000,
            ClientMatch::Net(n) => u16::from(n.prefix()),
        }
    }
}

/// How the configuration treats one client, for the steering core and `rlbd status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientMark {
    Excluded,
    /// Kept on this port (by name).
    Pinned(String),
}

/// A [`ClientMark`] borrowed from the rules: asked of every client every second, it allocates
/// nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkRef<'a> {
    Excluded,
    Pinned(&'a str),
}

/// `[clients]` parsed, as the steering core asks it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientRules {
    exclude: Vec<ClientMatch>,
    /// Most specific first: a client takes the first pin it matches.
    pin: Vec<(ClientMatch, String)>,
}

impl ClientRules {
    /// The rules of a validated section (entries that do not parse were refused by `validate`).
    pub fn new(c: &ClientsConfig) -> ClientRules {
        let exclude = c
            .exclude
            .iter()
            .filter_map(|e| ClientMatch::parse(e).ok())
            .collect();
        let mut pin: Vec<(ClientMatch, String)> = c
            .pin
            .iter()
            .filter_map(|(e, p)| Some((ClientMatch::parse(e).ok()?, p.clone())))
            .collect();
        pin.sort_by_key(|(m, _)| std::cmp::Reverse(m.specificity()));
        ClientRules { exclude, pin }
    }

    pub fn is_empty(&self) -> bool {
        self.exclude.is_empty() && self.pin.is_empty()
    }

    /// The mark of a client with `mac` using `addrs`: excluded wins over a pin (a MAC pinned
    /// and its address excluded can only be told apart at run time; leaving it alone is safe).
    pub fn mark_ref<I>(&self, mac: Mac, addrs: I) -> Option<MarkRef<'_>>
    where
        I: IntoIterator<Item = IpAddr> + Clone,
    {
        if self.exclude.iter().any(|m| m.matches(mac, addrs.clone())) {
            return Some(MarkRef::Excluded);
        }
        self.pin
            .iter()
            .find(|(m, _)| m.matches(mac, addrs.clone()))
            .map(|(_, p)| MarkRef::Pinned(p.as_str()))
    }

    /// [`mark_ref`](Self::mark_ref), owned.
    pub fn mark(&self, mac: Mac, addrs: &[IpAddr]) -> Option<ClientMark> {
        self.mark_ref(mac, addrs.iter().copied()).map(|m| match m {
            MarkRef::Excluded => ClientMark::Excluded,
            MarkRef::Pinned(p) => ClientMark::Pinned(p.to_string()),
        })
    }

    pub fn excluded(&self, mac: Mac, addrs: &[IpAddr]) -> bool {
        self.mark_ref(mac, addrs.iter().copied()) == Some(MarkRef::Excluded)
    }

    /// The port names pins name, for the check against the bond's slaves.
    pub fn pinned_ports(&self) -> impl Iterator<Item = &str> {
        self.pin.iter().map(|(_, p)| p.as_str())
    }
}

/// The TOML key of pin entry `entry`.
pub fn pin_key(entry: &str) -> String {
    format!("clients.pin.{entry:?}")
}

impl ClientsConfig {
    /// The first bad entry as (full key, message).
    pub fn validate(&self) -> Result<(), (String, String)> {
        let mut excluded = Vec::new();
        for e in &self.exclude {
            let m = ClientMatch::parse(e).map_err(|why| ("clients.exclude".to_string(), why))?;
            excluded.push((e, m));
        }
        for (e, port) in &self.pin {
            let m = ClientMatch::parse(e).map_err(|why| (pin_key(e), why))?;
            if let Some((x, _)) = excluded.iter().find(|(_, x)| x.overlaps(&m)) {
                let why = format!("{e} is pinned and excluded ({x:?} in clients.exclude)");
                return Err((pin_key(e), why));
            }
            if let Some(why) = super::interface_name_error(port) {
                return Err((pin_key(e), why));
            }
        }
        Ok(())
    }

    /// Refuses a pin to a port that is not one of `ports` (the bond's slaves, or `--ports`):
    /// only known once the daemon looks at the bond.
    pub fn check_ports(&self, ports: &[String]) -> Result<(), crate::policy::ConfigError> {
        for (e, port) in &self.pin {
            if !ports.iter().any(|p| p == port) {
                return Err(crate::policy::ConfigError {
                    place: self.place_of(e, true).cloned(),
                    key: pin_key(e),
                    message: format!(
                        "{port} is not a port of this daemon (its ports: {})",
                        ports.join(", ")
                    ),
                });
            }
        }
        Ok(())
    }

    /// Notes the `file:line` of each entry in `text`.
    pub(super) fn note_places(&mut self, path: &Path, text: &str) {
        let place = |line: Option<usize>| match line {
            Some(line) => format!("{}:{line}", path.display()),
            None => path.display().to_string(),
        };
        for e in &self.exclude {
            let at = place(entry_line(text, e, false));
            self.places.insert(format!("exclude.{e}"), at);
        }
        for e in self.pin.keys() {
            let at = place(entry_line(text, e, true));
            self.places.insert(format!("pin.{e}"), at);
        }
    }

    /// Where pin entry `entry` (or, `pin` false, exclude entry) is written.
    pub fn place_of(&self, entry: &str, pin: bool) -> Option<&String> {
        let kind = if pin { "pin" } else { "exclude" };
        self.places.get(&format!("{kind}.{entry}"))
    }
}

/// The line (1-based) where `entry` is written quoted as a pin (in `[clients.pin]` or on the
/// `pin =` line of `[clients]`) or an exclude entry (in `[clients]`, on any line of the list);
/// failing that, the line of the key.
pub(super) fn entry_line(text: &str, entry: &str, pin: bool) -> Option<usize> {
    let quoted = [format!("\"{entry}\""), format!("'{entry}'")];
    let mut section = String::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') && !t.starts_with("[[") {
            section = t.trim_matches(['[', ']', ' ']).replace(['"', ' '], "");
            continue;
        }
        let pin_line = section == "clients.pin" || section == "clients" && t.starts_with("pin");
        let ours = if pin {
            pin_line
        } else {
            section == "clients" && !pin_line
        };
        if ours && quoted.iter().any(|q| line.contains(q.as_str())) {
            return Some(i + 1);
        }
    }
    let key = if pin { "pin" } else { "exclude" };
    super::errors::line_of(text, Some("clients"), key)
}

#[cfg(test)]
mod tests;
