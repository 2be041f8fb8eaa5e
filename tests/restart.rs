//! A restart resumes (root; namespaces): a daemon killed with SIGKILL and started again with
//! the same state file takes its moves over — re-asserts them and keeps their hold-downs —
//! instead of forgetting them and moving the same clients again.

#[macro_use]
mod common;

use std::time::{Duration, Instant};

use common::daemon::{lab_test, signal, start, status, stop, tmp, Daemon};
use common::{lab_exe, overload};
use rlbd_lab::netns::{Lab, LabResult, PORTS};
use rlbd_lab::scenario::{start_sink, watch_move};

#[test]
fn a_daemon_killed_and_started_again_keeps_its_moves_and_their_hold_downs() {
    lab_test("restart", |lab, log| {
        let mut failures = Vec::new();
        let state = tmp(&format!("{}-restart.state", lab.prefix()));
        let _ = std::fs::remove_file(&state);
        let state_s = state.to_string_lossy().to_string();
        let args = ["--state-file", state_s.as_str()];
        let mut d = start(lab, "restart-1", &[], &args)?;
        let _sink = start_sink(lab, lab_exe())?;
        let mut sources = overload(lab, 40.0)?;
        let until = Instant::now() + Duration::from_secs(12);
        let Some(mv) = watch_move(lab, &["c1", "c3"], PORTS[0], until, || true)? else {
            for s in &mut sources {
                let _ = lab.stop_child(&mut s.child, Duration::from_millis(500));
            }
            stop(lab, &mut d);
            return Ok(vec![
                "no move within 12 s: the overload was not built".into()
            ]);
        };
        let to = mv.to_port.unwrap_or("?");
        // The state is written at most once a second after a change.
        lab.sleep(Duration::from_millis(1500))?;
        signal(d.child.id(), libc::SIGKILL);
        let _ = d.child.wait();
        let written = std::fs::metadata(&state).is_ok();
        say!(
            "{} moved to {to}; killed; state file written: {written}",
            mv.client
        );
        if !written {
            failures.push(format!("no state file at {state_s}"));
        }
        // RLBD_KEEP_STATE=PATH keeps the killed daemon's state file: how the fixture of this
        // release's format (tests/fixtures/state-v1.json) was made.
        if let Ok(keep) = std::env::var("RLBD_KEEP_STATE") {
            let _ = std::fs::copy(&state, keep);
        }
        let mut again = start(lab, "restart-2", &[], &args)?;
        check_resumed(lab, &again, &mv.client, to, &mut failures)?;
        for s in &mut sources {
            let _ = lab.stop_child(&mut s.child, Duration::from_millis(500));
        }
        stop(lab, &mut again);
        let mut text = std::fs::read_to_string(&d.log).unwrap_or_default();
        text.push_str(&std::fs::read_to_string(&again.log).unwrap_or_default());
        let _ = std::fs::write(log, text);
        let _ = std::fs::remove_file(&state);
        Ok(failures)
    });
}

/// The restarted daemon took the state file over, and for 10 s `client` stays on `to` with
/// its move held down and no overload move made.
fn check_resumed(
    lab: &Lab,
    again: &Daemon,
    client: &str,
    to: &str,
    failures: &mut Vec<String>,
) -> LabResult<()> {
    let took = std::fs::read_to_string(&again.log)
        .unwrap_or_default()
        .contains("moves taken over");
    // For the next 10 s: the moved client stays where it was put, and nothing moves it.
    let t = Instant::now();
    let mut away = Vec::new();
    while t.elapsed() < Duration::from_secs(10) {
        if lab.client_port(client)? != Some(to) {
            away.push(format!("{:.1} s", t.elapsed().as_secs_f64()));
        }
        lab.sleep(Duration::from_millis(250))?;
    }
    let s = status(again)?;
    let held = s.clients.iter().find(|c| c.moved.is_some()).and_then(|c| {
        c.moved
            .as_ref()
            .map(|m| (c.ip.clone(), m.to.clone(), m.hold_down_left_secs))
    });
    say!(
        "after the restart: taken over {took}, re-assertions {}, overload moves {}, held {held:?}, away {away:?}",
        s.totals.reasserts,
        s.totals.moves_overload
    );
    if !took {
        failures.push("the restarted daemon did not take the state file over".into());
    }
    if s.totals.moves_overload > 0 {
        failures.push(format!(
            "{} overload moves within the hold-down after the restart",
            s.totals.moves_overload
        ));
    }
    if !away.is_empty() {
        failures.push(format!("{client} left {to} after the restart at {away:?}"));
    }
    if !held
        .as_ref()
        .is_some_and(|(_, port, left)| port == to && *left > 0)
    {
        failures.push(format!("the status shows no held move to {to}: {held:?}"));
    }
    Ok(())
}
