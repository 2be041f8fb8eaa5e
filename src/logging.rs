//! Log set-up: plain lines with timestamps on a terminal; under systemd (`JOURNAL_STREAM` set)
//! no timestamps (the journal adds its own) and `<N>` syslog priority prefixes so the journal
//! files each line at its level.

use std::io::Write;

pub fn init(level: &str) {
    let mut b = env_logger::Builder::new();
    b.parse_filters(level);
    // RUST_LOG, when set, wins over the configured level.
    if let Ok(spec) = std::env::var("RUST_LOG") {
        b.parse_filters(&spec);
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
    let _ = b.try_init();
}
