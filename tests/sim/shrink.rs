//! A failure, shrunk: each kind of fault switched off in turn and the clients halved, keeping
//! every change after which the seed still fails no later than before. What is left is the
//! smallest world found that breaks a rule, with its trace and the environment to rerun it.

use super::run::{run, Failure};
use super::setup::{Fault, Setup};

/// The report of a failed run of `seed` over `days`: the failure as found, then the shortest
/// reproduction found. `RLBD_SIM_NO_SHRINK=1` skips the search (it reruns the seed up to a
/// dozen times, each no longer than the failure took).
pub fn report(first: &Setup, failure: &Failure) -> String {
    let found = failure.text(first);
    if std::env::var_os("RLBD_SIM_NO_SHRINK").is_some() {
        return found;
    }
    let (setup, small) = shrink(first, failure);
    if setup.faults == first.faults && setup.clients == first.clients {
        return format!("{found}\n(no smaller world fails: every fault and client is needed)");
    }
    format!(
        "{}\n\nshortest reproduction found: {} ({} clients, faults {}), failing at {} ms \
         instead of {} ms:\n{}",
        failure_head(&found),
        setup.env(),
        setup.clients,
        setup.faults,
        small.at_ms,
        failure.at_ms,
        small.text(&setup)
    )
}

/// The first line of a failure's text (its trace follows the shrunk run's instead).
fn failure_head(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

/// Switches off what the failure does not need, as long as the seed still fails.
fn shrink(first: &Setup, failure: &Failure) -> (Setup, Failure) {
    let mut best = first.clone();
    best.seconds = failure.at_ms / 1000;
    let mut fail = Failure {
        at_ms: failure.at_ms,
        check: failure.check,
        why: failure.why.clone(),
        trace: failure.trace.clone(),
    };
    for f in Fault::ALL {
        if !best.faults.has(f) {
            continue;
        }
        let mut trial = best.clone();
        trial.faults = best.faults.without(f);
        if let Err(e) = run(&trial) {
            trial.seconds = e.at_ms / 1000;
            (best, fail) = (trial, e);
        }
    }
    while best.clients > 4 {
        let mut trial = best.clone();
        trial.clients = best.clients / 2;
        match run(&trial) {
            Err(e) => {
                trial.seconds = e.at_ms / 1000;
                (best, fail) = (trial, e);
            }
            Ok(_) => break,
        }
    }
    (best, fail)
}
