//! Log set-up: plain lines with timestamps on a terminal; under systemd (`JOURNAL_STREAM` set)
//! no timestamps (the journal adds its own) and `<N>` syslog priority prefixes so the journal
//! files each line at its level.
//!
//! The level can change while running (SIGHUP): env_logger's own filter is fixed when it is
//! built, so it is built to pass everything and the level is `log`'s global maximum, which every
//! logging macro checks first. `RUST_LOG`, when set, is env_logger's filter and wins: a reload
//! then leaves the level alone.

use std::io::Write;

pub fn init(level: &str) {
    let mut b = env_logger::Builder::new();
    let env = std::env::var("RUST_LOG").ok();
    match &env {
        Some(spec) => {
            b.parse_filters(spec);
        }
        None => {
            b.filter_level(log::LevelFilter::Trace);
        }
    }
    if std::env::var_os("JOURNAL_STREAM").is_some() {
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
