//! Injected faults on the daemon's sends (root, namespace lab): each test makes one thing go
//! wrong around a running daemon and fails if the daemon misbehaves. The faults on its inputs
//! are in `faults.rs`.
//!
//! - refused sends: a port whose queue refuses every frame (ENOBUFS) makes the daemon count and
//!   retry a bounded number of times, with no busy loop (its CPU time is measured), and a move
//!   none of whose frames went out is not believed made;
//! - a port that just went down (ENETDOWN): frames already due on it are refused, counted, not
//!   retried, and the client is failed over to a live port, with no busy loop;
//! - a port fails while a client the server answered there (its ARP request, or its Neighbor
//!   Solicitation) has sent nothing yet, so is in no client table: rlbd moves it to the live
//!   port all the same (plain ports, where no bonding driver would), and leaves alone a client
//!   on that port the server never answered;

#[macro_use]
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::daemon::{cpu_rss, finish, lab_test, lab_test_with, signal, start, status, tmp};
use common::neigh::{batch, neigh_lines};
use common::{client_mac, lab_exe, overload, raw};
use rlbd::status::Totals;
use rlbd_lab::netns::{
    client_ip, client_ip6, Lab, LabOptions, LabResult, PORTS, SERVER_IP, SERVER_IP6,
};
use rlbd_lab::scenario::{start_sink, watch_move};

#[test]
fn refused_sends_are_counted_retried_and_never_spin() {
    lab_test("refused-sends", |lab, log| {
        let mut failures = Vec::new();
        // A short hold-down: a move whose every frame was refused is undone and tried again
        // after a delay that grows up to the hold-down.
        let mut d = start(lab, "send", &[], &["-v", "--hold-down", "5"])?;
        let _sink = start_sink(lab, lab_exe())?;
        let pid = d.child.id();
        let mut sources = overload(lab, 30.0)?;
        // Baseline: the daemon's CPU with the traffic alone.
        lab.sleep(Duration::from_millis(500))?;
        let (c0, _) = cpu_rss(pid);
        // p1 refuses every frame from now on (a queue of length 0: ENOBUFS on each send).
        let srv = lab.ns("srv");
        let tc = |args: &[&str]| -> LabResult<()> {
            let mut full = vec!["tc", "-n", &srv];
            full.extend_from_slice(args);
            rlbd_lab::netns::run_cmd(&full).map(drop)
        };
        tc(&[
            "qdisc", "replace", "dev", "p1", "root", "pfifo", "limit", "0",
        ])?;
        let t = Instant::now();
        lab.sleep(Duration::from_secs(8))?;
        let (c1, _) = cpu_rss(pid);
        let secs = t.elapsed().as_secs_f64();
        let s = status(&d)?;
        let t_ = &s.totals;
        let cpu_share = (c1 - c0) / secs;
        check_refused_sends(t_, secs, cpu_share, &mut failures);
        let text = std::fs::read_to_string(&d.log).unwrap_or_default();
        let warns = text
            .lines()
            .filter(|l| l.contains("WARN") && l.contains("cannot send"))
            .count();
        say!("'cannot send' lines in the log: {warns}");
        if warns as u64 > 1 + secs as u64 / 10 + 1 {
            failures.push(format!(
                "{warns} warnings about refused sends in {secs:.0} s"
            ));
        }
        // The queue takes frames again: the overload is resolved onto p1 (after the hold-down
        // of the moves that never reached the wire).
        tc(&["qdisc", "del", "dev", "p1", "root"])?;
        let t = Instant::now();
        let mut on_p1 = None;
        while t.elapsed() < Duration::from_secs(12) && on_p1.is_none() {
            for c in ["c1", "c3"] {
                if lab.client_port(c)? == Some(PORTS[1]) {
                    on_p1 = Some((c, t.elapsed().as_secs_f64()));
                }
            }
            lab.sleep(Duration::from_millis(100))?;
        }
        say!("after p1 takes frames again: {on_p1:?}");
        if on_p1.is_none() {
            failures.push("no client on p1 within 12 s after the sends succeed again".into());
        }
        finish(lab, &mut d, &mut sources, log);
        Ok(failures)
    });
}

/// While p1 refused every frame: the errors were counted and retried, a move none of whose
/// frames went out was not believed made, retries were bounded, and nothing spun.
fn check_refused_sends(
    t: &rlbd::status::Totals,
    secs: f64,
    cpu_share: f64,
    failures: &mut Vec<String>,
) {
    say!(
        "p1 refusing for {secs:.1} s: send errors {}, retries {}, updates sent {}, suppressed {}, \
         moves {} of which not made (every frame refused) {}; daemon CPU {:.1}% of a core",
        t.send_errors,
        t.send_retries,
        t.updates_sent,
        t.updates_suppressed,
        t.moves_overload,
        t.moves_refused,
        cpu_share * 100.0
    );
    if t.send_errors == 0 {
        failures.push("no send error counted: the fault was not injected (no move?)".into());
    }
    if t.send_retries == 0 {
        failures.push("refused updates were not retried".into());
    }
    if t.moves_overload > 0 && t.moves_refused == 0 {
        failures.push("a move none of whose frames went out is believed made".into());
    }
    // Each update is tried at most 1 + 5 times; updates are rate-limited per client.
    let bound = 6 * t.updates_sent.max(1);
    if t.send_errors > bound {
        failures.push(format!(
            "{} send errors for {} updates",
            t.send_errors, t.updates_sent
        ));
    }
    if cpu_share > 0.5 {
        failures.push(format!(
            "daemon used {:.0}% of a core: a busy loop",
            cpu_share * 100.0
        ));
    }
}

#[test]
fn sends_on_a_port_that_just_went_down_are_not_retried_and_the_client_fails_over() {
    lab_test("enetdown", |lab, log| {
        let mut failures = Vec::new();
        // Slow repeats: a move's repeats stay queued for seconds, due on a port that goes down.
        let conf = tmp(&format!("{}-enetdown.toml", lab.prefix()));
        std::fs::write(
            &conf,
            "[steering]\nrepeats = 6\nrepeat_interval_ms = 1000\n",
        )
        .map_err(|e| e.to_string())?;
        let conf_s = conf.to_string_lossy().to_string();
        let mut d = start(lab, "down", &[], &["-v", "--config", &conf_s])?;
        let _sink = start_sink(lab, lab_exe())?;
        let pid = d.child.id();
        let mut sources = overload(lab, 30.0)?;
        let moved = watch_move(
            lab,
            &["c1", "c3"],
            PORTS[0],
            Instant::now() + Duration::from_secs(10),
            || true,
        )?;
        let m = match moved {
            Some(m) if m.to_port == Some(PORTS[1]) => m,
            other => return Ok(vec![format!("no move to p1 within 10 s ({other:?})")]),
        };
        let before = status(&d)?.totals.send_errors;
        stall_past_p1_down(lab, pid)?;
        let (c0, _) = cpu_rss(pid);
        let t = Instant::now();
        let mut back = None;
        while t.elapsed() < Duration::from_secs(6) {
            if back.is_none() && lab.client_port(&m.client)? == Some(PORTS[0]) {
                back = Some(t.elapsed().as_secs_f64());
            }
            lab.sleep(Duration::from_millis(100))?;
        }
        let (c1, _) = cpu_rss(pid);
        let cpu_share = (c1 - c0) / t.elapsed().as_secs_f64();
        let s = status(&d)?;
        let t_ = &s.totals;
        let text = std::fs::read_to_string(&d.log).unwrap_or_default();
        let enetdown = text
            .lines()
            .filter(|l| l.contains("cannot send") && l.contains("Network is down"))
            .count();
        say!(
            "{} moved to p1, p1 down: send errors {} (before {before}), retries {}, failover \
             moves {}, log lines about ENETDOWN {enetdown}, {} back on p0 after {back:?} s; \
             daemon CPU {:.1}% of a core",
            m.client,
            t_.send_errors,
            t_.send_retries,
            t_.moves_failover,
            m.client,
            cpu_share * 100.0
        );
        enetdown_checks(t_, before, cpu_share, &mut failures);
        if back.is_none() {
            failures.push(format!("{} not back on p0 within 6 s", m.client));
        }
        finish(lab, &mut d, &mut sources, log);
        Ok(failures)
    });
}

/// Stops the daemon with a move's repeats queued for p1; while it is stopped, 2,000 neighbour
/// changes queue on its netlink socket ahead of p1's going down. On waking it reads a bounded
/// batch of them, runs its due timers (the repeats, on p1, which is down: ENETDOWN), and only
/// then learns that p1 is down.
fn stall_past_p1_down(lab: &Lab, pid: u32) -> LabResult<()> {
    signal(pid, libc::SIGSTOP);
    let res = (|| -> LabResult<()> {
        batch(lab, &neigh_lines("add", 0..2000))?;
        lab.ip("srv", &["link", "set", PORTS[1], "down"])?;
        // Stopped past the next repeat's due time (a second apart).
        lab.sleep(Duration::from_millis(1300))?;
        Ok(())
    })();
    signal(pid, libc::SIGCONT);
    res
}

/// After p1 went down under queued frames: errors counted, none retried, at most one per
/// frame, the client failed over, no busy loop.
fn enetdown_checks(t: &Totals, before: u64, cpu_share: f64, failures: &mut Vec<String>) {
    if t.send_errors == before {
        failures.push("no send error: no frame met the down port (fault not injected)".into());
    }
    if t.send_retries > 0 {
        failures.push(format!(
            "{} retries: a frame refused with ENETDOWN is the failover's business",
            t.send_retries
        ));
    }
    // One refused send per queued frame at most (ARP only: IPv6 is off in the lab).
    if t.send_errors > 6 {
        failures.push(format!("{} send errors for one move", t.send_errors));
    }
    if t.moves_failover == 0 {
        failures.push("the client on p1 was not failed over".into());
    }
    if cpu_share > 0.5 {
        failures.push(format!(
            "daemon used {:.0}% of a core: a busy loop",
            cpu_share * 100.0
        ));
    }
}

#[test]
fn a_client_answered_on_a_failed_port_is_moved_before_it_sends() {
    lab_test("answered", |lab, log| answered_case(lab, log, false));
}

#[test]
fn a_client_advertised_to_on_a_failed_port_is_moved_before_it_sends() {
    lab_test_with("answered6", LabOptions { ipv6: true }, |lab, log| {
        answered_case(lab, log, true)
    });
}

/// c2 resolves the server (one broadcast ARP request, or one Neighbor Solicitation), answered by
/// both ports (one subnet on two ports), and takes p0's answer (its own kernel, having asked
/// nothing, ignores both, so the test sets the entry it would have learnt); c3 sits on p0 too,
/// known to the server's neighbour table (so rlbd could send to it), but the server never
/// answered it. p0 fails: c2 must be on p1 at once, c3 left alone.
fn answered_case(lab: &Lab, log: &Path, v6: bool) -> LabResult<Vec<String>> {
    let mut failures = Vec::new();
    let mut d = start(lab, if v6 { "answered6" } else { "answered" }, &[], &["-v"])?;
    let ip_of = |c: &str| if v6 { client_ip6(c) } else { client_ip(c) };
    let port_of = |c: &str| {
        if v6 {
            lab.client_port6(c)
        } else {
            lab.client_port(c)
        }
    };
    let (mac, ip) = (client_mac(lab, "c2")?, ip_of("c2")?);
    lab.flush_neigh("c2")?;
    if v6 {
        lab.flush_neigh6("c2")?;
        raw(lab, "c2", &["solicit", "eth0", &mac, &ip, SERVER_IP6])?;
    } else {
        raw(lab, "c2", &["ask", "eth0", &mac, &ip, SERVER_IP])?;
    }
    lab.place_family("c2", PORTS[0], v6)?;
    let (mac3, ip3) = (client_mac(lab, "c3")?, ip_of("c3")?);
    let family = if v6 { "-6" } else { "-4" };
    lab.ip(
        "srv",
        &[
            family,
            "neigh",
            "replace",
            &ip3,
            "lladdr",
            &mac3,
            "dev",
            PORTS[0],
            "nud",
            "reachable",
        ],
    )?;
    lab.place_family("c3", PORTS[0], v6)?;
    lab.sleep(Duration::from_millis(500))?;
    let known = status(&d)?.clients.len();
    lab.set_port(PORTS[0], false)?;
    let t = Instant::now();
    let mut moved = None;
    while t.elapsed() < Duration::from_secs(3) && moved.is_none() {
        if port_of("c2")? == Some(PORTS[1]) {
            moved = Some(t.elapsed().as_secs_f64());
        }
        lab.sleep(Duration::from_millis(50))?;
    }
    lab.sleep(Duration::from_millis(1000))?;
    let c3 = port_of("c3")?;
    let text = std::fs::read_to_string(&d.log).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("the host or rlbd told it to use that port"))
        .collect();
    say!(
        "{}: clients in rlbd's table before the failure: {known}; c2 on p1 after {moved:?} s; \
         c3 on {c3:?}; failover lines for answered clients: {lines:?}",
        if v6 { "IPv6" } else { "IPv4" }
    );
    if known != 0 {
        failures.push(format!("{known} clients counted: c2 must be in no table"));
    }
    if moved.is_none() {
        failures.push(format!(
            "c2 (answered on p0, no frame sent) still not on p1 for {ip} 3 s after p0 failed"
        ));
    }
    if lines.len() != 1 || !lines[0].contains(&ip) {
        failures.push(format!("expected one failover line naming {ip}: {lines:?}"));
    }
    if c3 != Some(PORTS[0]) {
        failures.push(format!("c3, never answered, was moved to {c3:?}"));
    }
    lab.set_port(PORTS[0], true)?;
    finish(lab, &mut d, &mut [], log);
    Ok(failures)
}
