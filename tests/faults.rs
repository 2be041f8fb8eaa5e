//! Injected faults (root, namespace lab): each test makes one thing go wrong around a running
//! daemon and fails if the daemon misbehaves.
//!
//! - netlink overflow: 10,000 neighbour changes while the daemon is stopped overflow its netlink
//!   socket (ENOBUFS); it must re-read the tables and its neighbour view must equal the kernel's,
//!   stale entries included (read back with `rlbd status`);
//! - capture ring overflow: while the rings drop frames every second, drops are shown and no move
//!   is made; once they stop, the overload is acted on;
//! - refused sends: a port whose queue refuses every frame (ENOBUFS) makes the daemon count and
//!   retry a bounded number of times, with no busy loop (its CPU time is measured), and a move
//!   none of whose frames went out is not believed made;
//! - a port that just went down (ENETDOWN): frames already due on it are refused, counted, not
//!   retried, and the client is failed over to a live port, with no busy loop;
//! - a port fails while a client the server answered there (its ARP request, or its Neighbor
//!   Solicitation) has sent nothing yet, so is in no client table: rlbd moves it to the live
//!   port all the same (plain ports, where no bonding driver would), and leaves alone a client
//!   on that port the server never answered;
//! - control socket abuse: 1,000 connections at once, a client sending a byte a second and an
//!   oversized request, while traffic runs: timers stay on time, re-assertions still happen,
//!   memory stays bounded.

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::daemon::{cpu_rss, lab_test, lab_test_with, signal, start, status, stop, tmp, Daemon};
use common::{client_mac, lab_exe, raw};
use rlbd::lab::netns::{
    client_ip, client_ip6, Lab, LabOptions, LabResult, PORTS, SERVER_IP, SERVER_IP6,
};
use rlbd::lab::scenario::{start_sink, start_sources, watch_move};
use rlbd::status::{StatusReport, Totals};

/// Confirmed neighbours (with a MAC, not FAILED/INCOMPLETE) on the server's ports, per the
/// kernel.
fn kernel_neighbours(lab: &Lab) -> LabResult<usize> {
    let mut n = 0;
    for p in PORTS {
        let out = lab.ip("srv", &["neigh", "show", "dev", p])?;
        n += out
            .lines()
            .filter(|l| l.contains("lladdr") && !l.contains("FAILED") && !l.contains("INCOMPLETE"))
            .count();
    }
    Ok(n)
}

fn batch(lab: &Lab, lines: &[String]) -> LabResult<()> {
    let path = tmp(&format!("{}-batch.txt", lab.prefix()));
    std::fs::write(&path, lines.join("\n") + "\n").map_err(|e| e.to_string())?;
    let out = Command::new("ip")
        .args(["-n", &lab.ns("srv"), "-batch"])
        .arg(&path)
        .output()
        .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&path);
    if !out.status.success() {
        return Err(format!(
            "ip -batch failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

fn neigh_lines(verb: &str, range: std::ops::Range<u32>) -> Vec<String> {
    range
        .map(|i| {
            let (a, b) = (i / 250, i % 250 + 1);
            let mac = format!(
                "02:77:00:{:02x}:{:02x}:{:02x}",
                i >> 16,
                (i >> 8) & 255,
                i & 255
            );
            match verb {
                "add" => format!("neigh add 198.19.{a}.{b} lladdr {mac} dev p0 nud permanent"),
                _ => format!("neigh del 198.19.{a}.{b} dev p0"),
            }
        })
        .collect()
}

/// Waits until the daemon's neighbour count equals the kernel's and it has re-synchronised at
/// least `resyncs` times; returns (daemon's, kernel's, resyncs, seconds waited).
fn wait_in_sync(lab: &Lab, d: &Daemon, resyncs: u64) -> LabResult<(usize, usize, u64, f64)> {
    let t = Instant::now();
    loop {
        let s = status(d)?;
        let k = kernel_neighbours(lab)?;
        let done = s.totals.neighbours == k && s.totals.netlink_resyncs >= resyncs;
        if done || t.elapsed() > Duration::from_secs(10) {
            return Ok((
                s.totals.neighbours,
                k,
                s.totals.netlink_resyncs,
                t.elapsed().as_secs_f64(),
            ));
        }
        lab.sleep(Duration::from_millis(200))?;
    }
}

#[test]
fn netlink_overflow_is_resynchronised_and_the_view_matches_the_kernel() {
    lab_test("netlink-overflow", |lab, _log| {
        let mut failures = Vec::new();
        // A small socket buffer (hidden test knob), so 10,000 changes surely overflow it.
        let mut d = start(lab, "nl", &[("RLBD_TEST_NETLINK_RCVBUF", "65536")], &[])?;
        let pid = d.child.id();
        let base = status(&d)?.totals.neighbours;
        say!(
            "start: daemon knows {base} neighbours, kernel {}",
            kernel_neighbours(lab)?
        );

        // 1: 10,000 neighbours appear while the daemon cannot read.
        signal(pid, libc::SIGSTOP);
        batch(lab, &neigh_lines("add", 0..10_000))?;
        signal(pid, libc::SIGCONT);
        let (mine, kernel, resyncs, secs) = wait_in_sync(lab, &d, 1)?;
        say!("after 10,000 additions: daemon {mine}, kernel {kernel}, resyncs {resyncs}, {secs:.1} s");
        if resyncs < 1 {
            failures.push("no overrun was reported: the fault was not injected".into());
        }
        if mine != kernel {
            failures.push(format!(
                "after additions: daemon has {mine} neighbours, kernel {kernel}"
            ));
        }

        // 2: 10,000 go and 2,000 others come, unseen: the stale ones must go from the view.
        signal(pid, libc::SIGSTOP);
        batch(lab, &neigh_lines("del", 0..10_000))?;
        batch(lab, &neigh_lines("add", 20_000..22_000))?;
        signal(pid, libc::SIGCONT);
        let (mine, kernel, resyncs2, secs) = wait_in_sync(lab, &d, resyncs + 1)?;
        say!("after 10,000 removals and 2,000 additions: daemon {mine}, kernel {kernel}, resyncs {resyncs2}, {secs:.1} s");
        if resyncs2 <= resyncs {
            failures.push("the second burst caused no overrun: the fault was not injected".into());
        }
        if mine != kernel || kernel != base + 2_000 {
            failures.push(format!(
                "after removals: daemon has {mine} neighbours, kernel {kernel} (expected {})",
                base + 2_000
            ));
        }
        let text = std::fs::read_to_string(&d.log).unwrap_or_default();
        if text.contains("panicked") {
            failures.push("the daemon panicked".into());
        }
        stop(lab, &mut d);
        let _ = std::fs::copy(&d.log, _log);
        Ok(failures)
    });
}

/// c1 and c3 on p0 at full rate: p0 is overloaded and one of them should move.
fn overload(lab: &Lab, secs: f64) -> LabResult<Vec<rlbd::lab::scenario::Source>> {
    start_sources(lab, lab_exe(), &["c1", "c3"], secs)
}

#[test]
fn ring_overflow_is_counted_and_no_move_is_made_on_its_seconds() {
    lab_test("ring-overflow", |lab, log| {
        let mut failures = Vec::new();
        let conf = tmp(&format!("{}-ring.toml", lab.prefix()));
        // The smallest ring: a pause of the daemon overflows it at once.
        std::fs::write(
            &conf,
            "[capture]\nring_blocks = 2\nring_block_kib = 4\nsampling = \"off\"\n",
        )
        .map_err(|e| e.to_string())?;
        let conf_s = conf.to_string_lossy().to_string();
        let mut d = start(lab, "ring", &[], &["--config", &conf_s])?;
        let _sink = start_sink(lab, lab_exe())?;
        let pid = d.child.id();
        let mut sources = overload(lab, 22.0)?;
        // 9 s of stalls: 600 ms stopped in every second, so every second has drops.
        let t = Instant::now();
        let mut off_p0 = Vec::new();
        while t.elapsed() < Duration::from_secs(9) {
            signal(pid, libc::SIGSTOP);
            lab.sleep(Duration::from_millis(600))?;
            signal(pid, libc::SIGCONT);
            lab.sleep(Duration::from_millis(400))?;
            for c in ["c1", "c3"] {
                if lab.client_port(c)? != Some(PORTS[0]) {
                    off_p0.push(format!("{c} at {:.1} s", t.elapsed().as_secs_f64()));
                }
            }
        }
        let s = status(&d)?;
        let drops = s.ports[0].ring_drops;
        say!(
            "stalled 9 s: p0 ring drops {drops}, seconds without moves {}, moves {}, clients off p0: {off_p0:?}",
            s.totals.unreliable_seconds,
            s.totals.moves_overload
        );
        if drops == 0 {
            failures.push("no ring drops shown: the fault was not injected".into());
        }
        if s.totals.unreliable_seconds < 5 {
            failures.push(format!(
                "only {} seconds counted as unreliable over 9 s of drops",
                s.totals.unreliable_seconds
            ));
        }
        if s.totals.moves_overload > 0 || !off_p0.is_empty() {
            failures.push(format!(
                "moved while rings dropped: moves {}, {off_p0:?}",
                s.totals.moves_overload
            ));
        }
        // Clean seconds again: the overload is acted on.
        let moved = watch_move(
            lab,
            &["c1", "c3"],
            PORTS[0],
            Instant::now() + Duration::from_secs(8),
            || true,
        )?;
        say!("after the stalls: {moved:?}");
        if moved.is_none() {
            failures.push("no move within 8 s once the drops stopped".into());
        }
        for s in &mut sources {
            let _ = lab.stop_child(&mut s.child, Duration::from_millis(500));
        }
        stop(lab, &mut d);
        let _ = std::fs::copy(&d.log, log);
        Ok(failures)
    });
}

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
            rlbd::lab::netns::run_cmd(&full).map(drop)
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
        for s in &mut sources {
            let _ = lab.stop_child(&mut s.child, Duration::from_millis(500));
        }
        stop(lab, &mut d);
        let _ = std::fs::copy(&d.log, log);
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
        for s in &mut sources {
            let _ = lab.stop_child(&mut s.child, Duration::from_millis(500));
        }
        stop(lab, &mut d);
        let _ = std::fs::copy(&d.log, log);
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
    stop(lab, &mut d);
    let _ = std::fs::copy(&d.log, log);
    Ok(failures)
}

#[test]
fn control_socket_abuse_leaves_timers_on_time_and_memory_bounded() {
    lab_test("control-abuse", |lab, log| {
        let mut failures = Vec::new();
        let mut d = start(lab, "ctl", &[], &[])?;
        let _sink = start_sink(lab, lab_exe())?;
        let pid = d.child.id();
        let mut sources = overload(lab, 40.0)?;
        let moved = watch_move(
            lab,
            &["c1", "c3"],
            PORTS[0],
            Instant::now() + Duration::from_secs(8),
            || true,
        )?;
        let Some(m) = moved else {
            return Ok(vec!["no move within 8 s: nothing to keep on time".into()]);
        };
        let client = m.client.clone();
        lab.sleep(Duration::from_secs(1))?;
        let before = status(&d)?;
        let (_, rss0) = cpu_rss(pid);

        // The abuse, from this process: 1,000 connections at once, held open.
        let mut held = Vec::new();
        let mut refused = 0;
        for _ in 0..1000 {
            match UnixStream::connect(&d.socket) {
                Ok(s) => held.push(s),
                Err(_) => refused += 1,
            }
        }
        let (slow, big) = slow_and_big(&d.socket);
        let back = reassert_thrice(lab, &client, m.to_port)?;
        let slow_bytes = slow.join().unwrap_or(0);
        let big_answer = big.join().ok().flatten().unwrap_or_default();
        let (_, rss1) = cpu_rss(pid);
        drop(held);
        lab.sleep(Duration::from_secs(3))?;
        let (_, rss2) = cpu_rss(pid);
        let after = status(&d)?;
        say!(
            "abuse: 1,000 connects ({refused} refused), slow client sent {slow_bytes} bytes, \
             oversized request answered {:?}",
            big_answer.trim()
        );
        say!("re-assertions of {client} during the abuse, back after (s): {back:?}");
        say!(
            "timers: latest {} ms after due (before the abuse {} ms); late by > 100 ms: {} (before {})",
            after.totals.timer_late_max_ms,
            before.totals.timer_late_max_ms,
            after.totals.timers_late,
            before.totals.timers_late
        );
        say!("RSS: {rss0} KiB before, {rss1} KiB during, {rss2} KiB after");
        if back.iter().any(|b| b.is_none()) {
            failures.push(format!(
                "{client} not put back within 2 s of a re-ARP: {back:?}"
            ));
        }
        abuse_checks((&before, &after), slow_bytes, &big_answer, &mut failures);
        if rss1.max(rss2) > rss0 + 4096 {
            failures.push(format!("RSS grew from {rss0} to {} KiB", rss1.max(rss2)));
        }
        for s in &mut sources {
            let _ = lab.stop_child(&mut s.child, Duration::from_millis(500));
        }
        stop(lab, &mut d);
        let _ = std::fs::copy(&d.log, log);
        Ok(failures)
    });
}

/// Once the daemon has dropped the silent connections (its deadline is 2 s), one client sending
/// a byte a second (what it got to send) and one sending 1 MiB without a newline (the answer).
fn slow_and_big(
    socket: &Path,
) -> (
    std::thread::JoinHandle<usize>,
    std::thread::JoinHandle<Option<String>>,
) {
    let sock = socket.to_path_buf();
    let slow = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(2500));
        let mut n = 0;
        if let Ok(mut s) = UnixStream::connect(&sock) {
            for b in b"status top=1".iter().cycle().take(8) {
                if s.write_all(&[*b]).is_err() {
                    break;
                }
                n += 1;
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        n
    });
    let sock = socket.to_path_buf();
    let big = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(2600));
        let mut s = UnixStream::connect(&sock).ok()?;
        s.set_write_timeout(Some(Duration::from_secs(3))).ok();
        let _ = s.write_all(&vec![b'x'; 1 << 20]);
        let mut answer = String::new();
        s.set_read_timeout(Some(Duration::from_secs(3))).ok();
        let _ = s.read_to_string(&mut answer);
        Some(answer)
    });
    (slow, big)
}

/// Three re-assertions: the moved client re-ARPs, the host answers with its own port, rlbd must
/// put it back (20 ms after the host's answer, by default). When each was back, in seconds.
fn reassert_thrice(
    lab: &Lab,
    client: &str,
    to: Option<&'static str>,
) -> LabResult<Vec<Option<f64>>> {
    let mut back = Vec::new();
    for _ in 0..3 {
        lab.flush_neigh(client)?;
        let t = Instant::now();
        let mut at = None;
        while t.elapsed() < Duration::from_secs(2) {
            if lab.client_port(client)? == to {
                at = Some(t.elapsed().as_secs_f64());
                break;
            }
            lab.sleep(Duration::from_millis(20))?;
        }
        back.push(at);
        lab.sleep(Duration::from_millis(1500))?;
    }
    Ok(back)
}

/// The daemon's account of the abuse: re-assertions made, no timer late, the slow client cut
/// off by the deadline, the oversized request refused.
fn abuse_checks(
    (before, after): (&StatusReport, &StatusReport),
    slow_bytes: usize,
    big_answer: &str,
    failures: &mut Vec<String>,
) {
    if after.totals.reasserts <= before.totals.reasserts {
        failures.push("no re-assertion counted during the abuse".into());
    }
    if after.totals.timers_late > before.totals.timers_late {
        failures.push(format!(
            "{} timers ran more than 100 ms late during the abuse (latest {} ms)",
            after.totals.timers_late - before.totals.timers_late,
            after.totals.timer_late_max_ms
        ));
    }
    // The deadline (2 s) cuts the slow client off after a few bytes.
    if slow_bytes > 4 {
        failures.push(format!(
            "the slow client could send {slow_bytes} bytes, one a second"
        ));
    }
    if !big_answer.contains("longer than") {
        failures.push(format!("oversized request answered {big_answer:?}"));
    }
}
