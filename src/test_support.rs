//! What the in-crate root tests share with `tests/`: a privileged test is skipped only where it
//! is allowed to be. Under CI (`CI=true`) or with `RLBD_REQUIRE_ROOT_TESTS=1`, a skip fails the
//! test instead, so a green run means the privileged tests really ran.

/// Says why `test` is skipped, or panics when skipping is not allowed.
pub fn skip(test: &str, reason: &str) {
    let required = std::env::var("CI").is_ok_and(|v| v == "true")
        || std::env::var("RLBD_REQUIRE_ROOT_TESTS").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{test} could not run ({reason}), and CI=true or RLBD_REQUIRE_ROOT_TESTS=1 requires it"
    );
    eprintln!("skipping {test}: {reason}");
}

/// Runs the root test `test` (`f`) in a thread of its own, so that the network namespace it
/// enters does not leak into other tests' threads: skipped without root, or when `f` says why
/// it could not run; its panics are the test's.
pub fn in_own_thread(test: &str, f: impl FnOnce() -> Result<(), String> + Send + 'static) {
    if !root_or_skip(test) {
        return;
    }
    match std::thread::spawn(f).join() {
        Ok(Ok(())) => {}
        Ok(Err(reason)) => skip(test, &reason),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// True when running as root; otherwise [`skip`]s `test`.
pub fn root_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        skip(test, "needs root");
    }
    root
}
