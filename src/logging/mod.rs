//! Log set-up: plain lines with timestamps on a terminal; when stderr is the journal
//! (`JOURNAL_STREAM` names it) records go to the journal's native protocol, each with its fields
//! (`fields`) and at its priority. Should the journal's socket not answer, stderr gets `<N>`
//! syslog priority prefixes instead (no timestamps: the journal adds its own).
//!
//! The level can change while running (SIGHUP): env_logger's own filter is fixed when it is
//! built, so it is built to pass everything and the level is `log`'s global maximum, which every
//! logging macro checks first. `RUST_LOG`, when set, is env_logger's filter and wins: a reload
//! then leaves the level alone.

mod fields;
mod journal;

pub use fields::{emit, Fields, MessageId};

use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;

/// True when `JOURNAL_STREAM` (`DEVICE:INODE`, set by systemd) names `dev` and `ino`.
fn names(journal_stream: &str, dev: u64, ino: u64) -> bool {
    journal_stream
        .split_once(':')
        .and_then(|(d, i)| Some((d.parse::<u64>().ok()?, i.parse::<u64>().ok()?)))
        == Some((dev, ino))
}

/// True when stderr is the journal's stream. The variable alone is not enough: a process
/// started from a service with its stderr sent elsewhere (a file, a pipe) inherits it.
pub fn stderr_is_journal() -> bool {
    let Some(v) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(fd) = std::io::stderr().as_fd().try_clone_to_owned() else {
        return false;
    };
    match std::fs::File::from(fd).metadata() {
        Ok(m) => v.to_str().is_some_and(|v| names(v, m.dev(), m.ino())),
        Err(_) => false,
    }
}

/// The prefix for an error line written to stderr before (or without) the logger: `<3>` (err)
/// when stderr is the journal, so the journal files it as an error rather than at info.
pub fn error_prefix() -> &'static str {
    if stderr_is_journal() {
        "<3>"
    } else {
        ""
    }
}

/// Sets up logging at `level`; `bond`: the instance's name, `RLBD_BOND` in the journal.
pub fn init(level: &str, bond: Option<&str>) {
    let env = std::env::var("RUST_LOG").ok();
    let journal = stderr_is_journal();
    if journal {
        if let Ok(max) = journal::install(bond, env.as_deref()) {
            log::set_max_level(max);
            set_level(level);
            return;
        }
    }
    let mut b = env_logger::Builder::new();
    match &env {
        Some(spec) => {
            b.parse_filters(spec);
        }
        None => {
            b.filter_level(log::LevelFilter::Trace);
        }
    }
    if journal {
        b.format(|buf, record| {
            let prio = match record.level() {
                log::Level::Error => 3,
                log::Level::Warn => 4,
                log::Level::Info => 6,
                log::Level::Debug | log::Level::Trace => 7,
            };
            writeln!(buf, "<{prio}>{}", record.args())
        });
    } else {
        b.format(|buf, record| {
            writeln!(
                buf,
                "{} {:5} {}",
                buf.timestamp_millis(),
                record.level(),
                record.args()
            )
        });
    }
    if b.try_init().is_ok() && env.is_none() {
        set_level(level);
    }
}

/// Makes `level` ("off", "error", ..., "trace") the level from now on, unless `RUST_LOG` rules.
pub fn set_level(level: &str) {
    if std::env::var_os("RUST_LOG").is_none() {
        log::set_max_level(level.parse().unwrap_or(log::LevelFilter::Info));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_stream_must_name_the_file() {
        assert!(names("8:12345", 8, 12345));
        assert!(!names("8:12345", 8, 12346));
        assert!(!names("9:12345", 8, 12345));
        assert!(!names("8-12345", 8, 12345));
        assert!(!names("", 0, 0));
        assert!(!names("x:y", 0, 0));
    }

    #[test]
    fn a_stderr_that_is_not_the_journal_gets_no_prefix() {
        // The test harness's stderr is a terminal, pipe or file, never a stream whose device
        // and inode are 0:1 (no file system has inode 1 as a stream).
        std::env::set_var("JOURNAL_STREAM", "0:1");
        assert!(!stderr_is_journal());
        assert_eq!(error_prefix(), "");
        // What stderr really is, named: then it is trusted.
        let m = std::fs::File::from(std::io::stderr().as_fd().try_clone_to_owned().unwrap())
            .metadata()
            .unwrap();
        std::env::set_var("JOURNAL_STREAM", format!("{}:{}", m.dev(), m.ino()));
        assert!(stderr_is_journal());
        assert_eq!(error_prefix(), "<3>");
        std::env::remove_var("JOURNAL_STREAM");
    }
}
