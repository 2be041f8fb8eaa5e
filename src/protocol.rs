//! The control socket's protocol, shared by the daemon (`daemon::control`, the server) and
//! `rlbd status` / `rlbd metrics` (`statusview`, the client).
//!
//! One request per connection: the client sends one line (at most [`MAX_REQUEST`] bytes with its
//! `\n`) and reads to end of file. `status` answers with the [`StatusReport`](crate::status) as
//! one line of JSON, its client list cut to the busiest N by the daemon with `status top=N`;
//! `metrics` answers with the Prometheus text exposition format; `reload` reads the configuration
//! again and answers, once that is done, with one line `ok: ...` or (the daemon keeps its
//! settings) `error: ...`. Anything wrong is answered with one line `error: ...`.

use std::path::{Path, PathBuf};

/// Where the daemons' control sockets live by default: `/run/rlbd/NAME.sock`.
pub const CONTROL_DIR: &str = "/run/rlbd";
/// Longest request line the daemon reads, newline included.
pub const MAX_REQUEST: usize = 256;
/// Longest answer the client reads (a full table of 16 M clients would not fit; 4096 does).
pub const MAX_RESPONSE: usize = 256 << 20;

/// The default control socket of the daemon for bond (or first port) `name`.
pub fn default_socket(name: &str) -> PathBuf {
    Path::new(CONTROL_DIR).join(format!("{name}.sock"))
}

/// What a client asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// The status report; `top`: only the busiest N clients (all when `None`).
    Status { top: Option<usize> },
    /// The metrics, Prometheus text format.
    Metrics,
    /// Read the configuration file again and apply it, as SIGHUP does; answered when done.
    Reload,
}

impl Request {
    /// The request line, newline included, as the client sends it.
    pub fn line(&self) -> String {
        match self {
            Request::Status { top: None } => "status\n".into(),
            Request::Status { top: Some(n) } => format!("status top={n}\n"),
            Request::Metrics => "metrics\n".into(),
            Request::Reload => "reload\n".into(),
        }
    }

    /// Parses one request line (without its newline). The error is the text of the `error:`
    /// answer: it quotes at most 40 characters of what it refuses.
    pub fn parse(line: &[u8]) -> Result<Request, String> {
        let text = String::from_utf8_lossy(line);
        let mut words = text.split_whitespace();
        let shown = || -> String { text.trim().chars().take(40).collect() };
        let req = match words.next() {
            None => return Err("empty request; send `status`, `metrics` or `reload`".into()),
            Some("metrics") => Request::Metrics,
            Some("reload") => Request::Reload,
            Some("status") => {
                let mut top = None;
                for w in words.by_ref() {
                    let n = w
                        .strip_prefix("top=")
                        .and_then(|n| n.parse::<usize>().ok())
                        .ok_or_else(|| {
                            format!("bad status option {:?}; expected top=N", shown())
                        })?;
                    top = Some(n);
                }
                Request::Status { top }
            }
            Some(_) => {
                return Err(format!(
                    "unknown request {:?}; send `status`, `metrics` or `reload`",
                    shown()
                ))
            }
        };
        match words.next() {
            None => Ok(req),
            Some(_) => Err(format!("unexpected words in {:?}", shown())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        for r in [
            Request::Status { top: None },
            Request::Status { top: Some(3) },
            Request::Metrics,
            Request::Reload,
        ] {
            let line = r.line();
            assert_eq!(Request::parse(line.trim_end().as_bytes()), Ok(r));
        }
    }

    #[test]
    fn bad_requests_say_what_is_wrong() {
        assert!(Request::parse(b"").unwrap_err().contains("empty"));
        assert!(Request::parse(b"  ").unwrap_err().contains("empty"));
        assert!(Request::parse(b"stats")
            .unwrap_err()
            .contains("unknown request"));
        assert!(Request::parse(b"status top=x")
            .unwrap_err()
            .contains("top=N"));
        assert!(Request::parse(b"metrics now")
            .unwrap_err()
            .contains("unexpected"));
        assert!(Request::parse(b"reload now")
            .unwrap_err()
            .contains("unexpected"));
        let long = vec![b'x'; 200];
        assert!(
            Request::parse(&long).unwrap_err().len() < 100,
            "quotes only a prefix"
        );
        // Invalid UTF-8 is refused, never a panic.
        assert!(Request::parse(&[0xff, 0xfe]).is_err());
    }
}
