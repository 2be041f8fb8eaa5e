//! Records to the journal over its native protocol (systemd-journal-logger), each with its
//! key-values as fields ([`super::fields`]) and `RLBD_BOND` naming the instance.

use log::{Level, Log, Metadata, Record};
use systemd_journal_logger::JournalLog;

/// The journal backend: `RUST_LOG`'s filter (when set) in front of the journal's socket.
struct Journal {
    sink: JournalLog,
    filter: Option<env_logger::Logger>,
}

/// The level the backend is handed for `level`, so that the journal files each record at the
/// priority rlbd documents (and wrote on the stream before): error 3, warn 4, info 6, debug and
/// trace 7. The crate maps one step higher (info to notice, debug to info), which would put
/// every debug line in `journalctl -p info`.
fn backend_level(level: Level) -> Level {
    match level {
        Level::Error => Level::Error,
        Level::Warn => Level::Warn,
        Level::Info => Level::Debug,
        Level::Debug | Level::Trace => Level::Trace,
    }
}

impl Log for Journal {
    fn enabled(&self, m: &Metadata) -> bool {
        self.filter.as_ref().is_none_or(|f| f.enabled(m))
    }

    fn log(&self, r: &Record) {
        if !self.filter.as_ref().is_none_or(|f| f.matches(r)) {
            return;
        }
        self.sink.log(
            &Record::builder()
                .args(*r.args())
                .level(backend_level(r.level()))
                .target(r.target())
                .module_path(r.module_path())
                .file(r.file())
                .line(r.line())
                .key_values(r.key_values())
                .build(),
        );
    }

    fn flush(&self) {}
}

/// Installs the journal backend (identifier `rlbd`, `RLBD_BOND=bond` on every record when
/// known; `rust_log`: env_logger's filter). An error: the journal's socket cannot be reached
/// (then the caller logs to stderr as text), or a logger is already installed.
pub fn install(bond: Option<&str>, rust_log: Option<&str>) -> std::io::Result<log::LevelFilter> {
    let mut sink = JournalLog::new()?.with_syslog_identifier("rlbd".into());
    if let Some(b) = bond.filter(|b| !b.is_empty()) {
        sink = sink.add_extra_field("RLBD_BOND", b);
    }
    let filter = rust_log.map(|spec| env_logger::Builder::new().parse_filters(spec).build());
    let max = filter
        .as_ref()
        .map_or(log::LevelFilter::Trace, env_logger::Logger::filter);
    log::set_boxed_logger(Box::new(Journal { sink, filter }))
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_gets_rlbds_priorities() {
        // The crate's map: Error 3, Warn 4, Info 5, Debug 6, Trace 7.
        let prio = |l: Level| match backend_level(l) {
            Level::Error => 3,
            Level::Warn => 4,
            Level::Info => 5,
            Level::Debug => 6,
            Level::Trace => 7,
        };
        assert_eq!(prio(Level::Error), 3);
        assert_eq!(prio(Level::Warn), 4);
        assert_eq!(prio(Level::Info), 6);
        assert_eq!(prio(Level::Debug), 7);
        assert_eq!(prio(Level::Trace), 7);
    }
}
