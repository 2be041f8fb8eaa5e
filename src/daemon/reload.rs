//! systemd's reload protocol: `RELOADING=1` with the monotonic time before a reload, `READY=1`
//! after, bad file or not (the daemon runs on either way; the answer is the engine's,
//! [`crate::engine::reload_answer`]). systemd 253 and later
//! (`Type=notify-reload`) match the notification to the reload they asked for by the time;
//! older ones ignore it.

/// The notification that starts a reload.
pub fn reloading(usec: u64) -> String {
    format!("RELOADING=1\nMONOTONIC_USEC={usec}\nSTATUS=reloading the configuration")
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
}
