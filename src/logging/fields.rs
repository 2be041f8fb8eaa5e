//! What a log record is about, as data: the journal gets it as fields (`RLBD_CLIENT=10.0.0.7`),
//! so that a script filters records without reading their words. The engine and the steering
//! core fill these in where they write the text; the shell hands them to `log` as key-values
//! ([`emit`]), and the journal backend writes each as a field. Plain-text logging ignores them:
//! the text says the same in words.

use std::net::IpAddr;

use log::Level;

use crate::Mac;

/// The journal's `MESSAGE_ID`s (128-bit, as `journalctl MESSAGE_ID=...` takes them): one per
/// kind of record a script counts. They never change; a new kind gets a new id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageId {
    /// A client moved to another port (in a dry run: would have been; `RLBD_DRY_RUN=1`).
    Move,
    /// A guest behind the bond moved to another port.
    GuestMove,
    /// A configuration refused on a reload (the daemon runs on with its settings). A start
    /// refused for its configuration (exit 78) is the last line on stderr instead: a record sent
    /// to the journal's socket just before the exit may reach it after the process is gone, and
    /// then names no unit.
    ConfigRefused,
}

impl MessageId {
    pub const MOVE: &'static str = "4dab3318fc4a4242b535545f4eed1ed7";
    pub const GUEST_MOVE: &'static str = "c09df20b45ad4f879b940c63bf1c8271";
    pub const CONFIG_REFUSED: &'static str = "8c9d83c0ae91406eb6a5d890eb8746d7";

    pub const fn as_str(self) -> &'static str {
        match self {
            MessageId::Move => Self::MOVE,
            MessageId::GuestMove => Self::GUEST_MOVE,
            MessageId::ConfigRefused => Self::CONFIG_REFUSED,
        }
    }
}

/// A record's fields; each is left out when `None`. `RLBD_BOND` is not here: one daemon runs
/// one instance, and the logger adds it to every record ([`super::init`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fields {
    pub id: Option<MessageId>,
    /// The port the record is about: a move's destination.
    pub port: Option<String>,
    /// The port a move leaves.
    pub from_port: Option<String>,
    /// The client's address (its first claimed one, for a move).
    pub client: Option<IpAddr>,
    pub client_mac: Option<Mac>,
    /// The client's VLAN (0: untagged, left out).
    pub vlan: u16,
    /// Why: overload, failover, placement, room, settle (a move's), reassert.
    pub reason: Option<&'static str>,
    pub dry_run: bool,
}

impl Fields {
    /// Fields about port `name` only.
    pub fn port(name: &str) -> Self {
        Fields {
            port: Some(name.to_string()),
            ..Fields::default()
        }
    }

    /// A refused configuration's record.
    pub fn config_refused() -> Self {
        Fields {
            id: Some(MessageId::ConfigRefused),
            ..Fields::default()
        }
    }

    /// The journal's field names and values, in a fixed order.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut v = Vec::new();
        if let Some(id) = self.id {
            v.push(("MESSAGE_ID", id.as_str().to_string()));
        }
        let mut put = |k, x: Option<String>| {
            if let Some(x) = x {
                v.push((k, x));
            }
        };
        put("RLBD_PORT", self.port.clone());
        put("RLBD_FROM_PORT", self.from_port.clone());
        put("RLBD_CLIENT", self.client.map(|a| a.to_string()));
        put("RLBD_CLIENT_MAC", self.client_mac.map(|m| m.to_string()));
        put("RLBD_VLAN", (self.vlan != 0).then(|| self.vlan.to_string()));
        put("RLBD_REASON", self.reason.map(str::to_string));
        put("RLBD_DRY_RUN", self.dry_run.then(|| "1".to_string()));
        v
    }
}

/// Logs `text` at `level` with `fields` as the record's key-values (target: `target`, the
/// module that carries the engine's record out).
pub fn emit(level: Level, target: &str, text: &str, fields: &Fields) {
    if level > log::max_level() {
        return;
    }
    let pairs = fields.pairs();
    let kvs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    log::logger().log(
        &log::Record::builder()
            .args(format_args!("{text}"))
            .level(level)
            .target(target)
            .key_values(&&kvs[..])
            .build(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_maps_to_its_journal_fields() {
        let f = Fields {
            id: Some(MessageId::Move),
            port: Some("eth1".into()),
            from_port: Some("eth0".into()),
            client: Some("10.0.0.7".parse().unwrap()),
            client_mac: Some(Mac::new(2, 0, 0, 0, 0, 7)),
            vlan: 0,
            reason: Some("overload"),
            dry_run: false,
        };
        let p = f.pairs();
        let want = [
            ("MESSAGE_ID", "4dab3318fc4a4242b535545f4eed1ed7"),
            ("RLBD_PORT", "eth1"),
            ("RLBD_FROM_PORT", "eth0"),
            ("RLBD_CLIENT", "10.0.0.7"),
            ("RLBD_CLIENT_MAC", "02:00:00:00:00:07"),
            ("RLBD_REASON", "overload"),
        ];
        let got: Vec<(&str, &str)> = p.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn fields_without_a_value_are_left_out() {
        assert!(Fields::default().pairs().is_empty());
        let f = Fields {
            vlan: 20,
            dry_run: true,
            ..Fields::port("eth2")
        };
        let got: Vec<(&str, String)> = f.pairs();
        assert_eq!(
            got,
            [
                ("RLBD_PORT", "eth2".to_string()),
                ("RLBD_VLAN", "20".to_string()),
                ("RLBD_DRY_RUN", "1".to_string()),
            ]
        );
    }

    #[test]
    fn message_ids_are_128_bit_hex_and_distinct() {
        let ids = [
            MessageId::Move,
            MessageId::GuestMove,
            MessageId::ConfigRefused,
        ];
        for id in ids {
            let s = id.as_str();
            assert_eq!(s.len(), 32, "{s}");
            assert!(s
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        }
        assert_ne!(ids[0].as_str(), ids[1].as_str());
        assert_ne!(ids[1].as_str(), ids[2].as_str());
        assert_ne!(ids[0].as_str(), ids[2].as_str());
    }

    /// What `emit` hands the logger: the text, and each field as a key-value (what the
    /// journal backend writes as a field).
    #[test]
    fn emit_hands_the_fields_to_the_logger_as_key_values() {
        use std::sync::Mutex;
        type Seen = Vec<(String, Vec<(String, String)>)>;
        static SEEN: Mutex<Seen> = Mutex::new(Vec::new());
        struct Capture;
        struct Pairs(Vec<(String, String)>);
        impl<'k> log::kv::VisitSource<'k> for Pairs {
            fn visit_pair(
                &mut self,
                k: log::kv::Key<'k>,
                v: log::kv::Value<'k>,
            ) -> Result<(), log::kv::Error> {
                self.0.push((k.to_string(), v.to_string()));
                Ok(())
            }
        }
        impl log::Log for Capture {
            fn enabled(&self, _: &log::Metadata) -> bool {
                true
            }
            fn log(&self, r: &log::Record) {
                let mut p = Pairs(Vec::new());
                r.key_values().visit(&mut p).unwrap();
                let text = r.args().to_string();
                SEEN.lock().unwrap().push((text, p.0));
            }
            fn flush(&self) {}
        }
        // The only logger this test binary installs.
        log::set_boxed_logger(Box::new(Capture)).unwrap();
        log::set_max_level(log::LevelFilter::Info);
        emit(Level::Debug, "t", "filtered out", &Fields::port("eth0"));
        let f = Fields {
            reason: Some("failover"),
            ..Fields::port("eth0")
        };
        emit(Level::Info, "t", "port eth0 is down", &f);
        let seen = SEEN.lock().unwrap().clone();
        let want = vec![
            ("RLBD_PORT".to_string(), "eth0".to_string()),
            ("RLBD_REASON".to_string(), "failover".to_string()),
        ];
        assert_eq!(seen, [("port eth0 is down".to_string(), want)]);
    }

    /// Every field name is one the journal accepts as is (uppercase, digits, underscore; not
    /// starting with an underscore), so the backend passes it unchanged.
    #[test]
    fn field_names_are_valid_journal_names() {
        let f = Fields {
            id: Some(MessageId::GuestMove),
            port: Some("p".into()),
            from_port: Some("q".into()),
            client: Some("::1".parse().unwrap()),
            client_mac: Some(Mac::new(0, 0, 0, 0, 0, 1)),
            vlan: 1,
            reason: Some("reassert"),
            dry_run: true,
        };
        let p = f.pairs();
        assert_eq!(p.len(), 8);
        for (k, _) in p {
            assert!(k.len() <= 64 && !k.starts_with('_'));
            assert!(k
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'));
        }
    }
}
