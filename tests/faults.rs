//! Injected faults around the daemon's inputs (root, namespace lab): each test makes one thing
//! go wrong around a running daemon and fails if the daemon misbehaves. The faults on its sends
//! are in `send_faults.rs`.
//!
//! - netlink overflow: 10,000 neighbour changes while the daemon is stopped overflow its netlink
//!   socket (ENOBUFS); it must re-read the tables and its neighbour view must equal the kernel's,
//!   stale entries included (read back with `rlbd status`);
//! - capture ring overflow: while the rings drop frames every second, drops are shown and no move
//!   is made; once they stop, the overload is acted on;
//! - control socket abuse: 1,000 connections at once, a client sending a byte a second and an
//!   oversized request, while traffic runs: timers stay on time, re-assertions still happen,
//!   memory stays bounded.

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use common::daemon::{cpu_rss, finish, lab_test, signal, start, status, stop, tmp, Daemon};
use common::neigh::{batch, neigh_lines};
use common::{lab_exe, overload};
use rlbd::status::StatusReport;
use rlbd_lab::netns::{Lab, LabResult, PORTS};
use rlbd_lab::scenario::{start_sink, watch_move};

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
        finish(lab, &mut d, &mut sources, log);
        Ok(failures)
    });
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
        finish(lab, &mut d, &mut sources, log);
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
