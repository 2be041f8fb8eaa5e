//! systemd's reload protocol: `RELOADING=1` with the monotonic time before a reload, `READY=1`
//! after, bad file or not (the daemon runs on either way). systemd 253 and later
//! (`Type=notify-reload`) match the notification to the reload they asked for by the time;
//! older ones ignore it.

/// The notification that starts a reload.
pub fn reloading(usec: u64) -> String {
    format!("RELOADING=1\nMONOTONIC_USEC={usec}\nSTATUS=reloading the configuration")
}

/// The answer to a reload request: what was done, and what only a restart applies.
pub fn answer(from: &str, restart: &[&str]) -> String {
    match restart {
        [] => format!("configuration reloaded from {from}; state kept"),
        r => format!(
            "configuration reloaded from {from}; state kept; changed but applied only by a \
             restart: {}",
            r.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_reloading_notification_carries_the_monotonic_time() {
        let a = crate::daemon::monotonic_usec();
        let b = crate::daemon::monotonic_usec();
        assert!(a > 0 && b >= a);
        assert_eq!(
            super::reloading(123),
            "RELOADING=1\nMONOTONIC_USEC=123\nSTATUS=reloading the configuration"
        );
    }

    #[test]
    fn the_answer_names_what_only_a_restart_applies() {
        assert_eq!(
            super::answer("/etc/rlbd/bond0.toml", &["the bond or ports"]),
            "configuration reloaded from /etc/rlbd/bond0.toml; state kept; changed but applied \
             only by a restart: the bond or ports"
        );
    }
}
