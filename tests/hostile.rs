//! A hostile or confused LAN (root, namespace lab):
//!
//! - a third host (c4) claims the server's addresses with a storm of gratuitous ARPs, unsolicited
//!   ARP replies and unsolicited Neighbor Advertisements carrying its own MAC: rlbd never answers
//!   in a storm (its updates stay within the per-client limit), and warns once per episode,
//!   naming the foreign MAC and the address;
//! - a client that changes its MAC for the same IP, and a client that takes another's IP: rlbd
//!   follows the kernel's neighbour table and never steers a MAC the table does not confirm;
//!   once the table confirms the new MAC, it may.
//!
//! Frames are made by tests/lab/rawsend.py (Python's AF_PACKET), only between the lab's
//! namespaces.

#[macro_use]
mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::daemon::{finish, lab_test, lab_test_with, start, status, Daemon};
use common::{client_mac, lab_exe, overload, raw, rawsend};
use rlbd_lab::netns::{client_ip6, Lab, LabOptions, LabResult, PORTS, SERVER_IP, SERVER_IP6};
use rlbd_lab::scenario::{start_sink, watch_move};

const PER_CLIENT_PER_SEC: u64 = rlbd::config::DEFAULT_PER_CLIENT_PER_SEC as u64;

#[test]
fn a_host_claiming_our_address_gets_one_warning_per_episode_and_no_storm() {
    lab_test_with("foreign-claim", LabOptions { ipv6: true }, |lab, log| {
        let mut failures = Vec::new();
        let mut d = start(lab, "claim", &[], &[])?;
        let _sink = start_sink(lab, lab_exe())?;
        let mut sources = overload(lab, 25.0)?;
        let moved = watch_move(
            lab,
            &["c1", "c3"],
            PORTS[0],
            Instant::now() + Duration::from_secs(8),
            || true,
        )?;
        say!("before the storm: {moved:?}");
        lab.sleep(Duration::from_secs(1))?;
        let (evil, own6) = claim_storm(lab, &d, &mut failures)?;
        // The same claimant again at once is the same episode: no new warning.
        raw(
            lab,
            "c4",
            &[
                "claim", "eth0", &evil, SERVER_IP, SERVER_IP6, "1", "20", &own6,
            ],
        )?;
        lab.sleep(Duration::from_millis(300))?;
        let again = status(&d)?.totals.foreign_claims;
        if again != 2 {
            failures.push(format!(
                "a claim 0 s later counted as a new episode ({again})"
            ));
        }
        finish(lab, &mut d, &mut sources, log);
        Ok(failures)
    });
}

/// A 5 s storm of claims to the server's addresses from c4: rlbd's updates stay within the
/// per-client limit, and it warns once per address and counts two episodes. Returns c4's MAC
/// and IPv6 address.
fn claim_storm(lab: &Lab, d: &Daemon, failures: &mut Vec<String>) -> LabResult<(String, String)> {
    let before = status(d)?;
    let evil = client_mac(lab, "c4")?;
    let own6 = client_ip6("c4")?;
    // 5 s, 50 of each kind a second: 750 claims (ARP request, ARP reply, NA) from c4.
    let t = Instant::now();
    let n = raw(
        lab,
        "c4",
        &[
            "claim", "eth0", &evil, SERVER_IP, SERVER_IP6, "5", "50", &own6,
        ],
    )?;
    let secs = t.elapsed().as_secs_f64();
    lab.sleep(Duration::from_millis(500))?;
    let after = status(d)?;
    let sent = after.totals.updates_sent - before.totals.updates_sent;
    let reasserts = after.totals.reasserts - before.totals.reasserts;
    let moved_clients = after.totals.clients_moved.max(1) as u64;
    let text = std::fs::read_to_string(&d.log).unwrap_or_default();
    let warned = |ip: &str| {
        text.lines()
            .filter(|l| l.contains("WARN") && l.contains(&evil) && l.contains(ip))
            .count()
    };
    let (w4, w6) = (warned(SERVER_IP), warned(SERVER_IP6));
    say!(
        "storm of {} frames in {secs:.1} s from {evil}: rlbd sent {sent} updates \
         ({reasserts} re-assertions) to {moved_clients} moved client(s); warnings: {w4} for \
         {SERVER_IP}, {w6} for {SERVER_IP6}; foreign claim episodes {}",
        n.trim(),
        after.totals.foreign_claims
    );
    let limit = PER_CLIENT_PER_SEC * (secs.ceil() as u64 + 1) * moved_clients;
    if sent > limit {
        failures.push(format!(
            "{sent} updates during the storm, over the per-client limit ({limit})"
        ));
    }
    if w4 != 1 || w6 != 1 {
        failures.push(format!(
            "expected one warning per address for the episode, got {w4} (IPv4) and {w6} (IPv6)"
        ));
    }
    if after.totals.foreign_claims != 2 {
        failures.push(format!(
            "{} foreign claim episodes counted, expected 2",
            after.totals.foreign_claims
        ));
    }
    Ok((evil, own6))
}

/// Sends UDP at `mbit` from `node` for `secs` in the background, as `src_mac`/`src_ip`, to the
/// server's address on `port`'s MAC.
fn udp_from(
    lab: &Lab,
    node: &str,
    src_mac: &str,
    src_ip: &str,
    port: &str,
    mbit: u32,
    secs: u32,
) -> LabResult<std::process::Child> {
    let script = rawsend().to_string_lossy().to_string();
    let dst = lab.port_mac(port)?;
    let (mbit, secs) = (mbit.to_string(), secs.to_string());
    lab.spawn_with(
        node,
        &[
            "python3", &script, "udp", "eth0", src_mac, src_ip, &dst, SERVER_IP, &mbit, &secs,
        ],
        Stdio::null(),
        Stdio::inherit(),
    )
}

#[test]
fn macs_the_neighbour_table_does_not_confirm_are_never_steered() {
    lab_test("unconfirmed-macs", |lab, log| {
        let mut failures = Vec::new();
        let mut d = start(lab, "unconf", &[], &["-v"])?;
        // c2 changes its MAC, keeping 198.18.0.12; c4 sends as 198.18.0.11, c1's address. The
        // server's table (seeded permanent by the lab) still has .12 at c2's old MAC and .11 at
        // c1's: neither new sender is confirmed.
        let new_mac = "02:00:c6:12:00:99";
        lab.ip("c2", &["link", "set", "eth0", "address", new_mac])?;
        let c4_mac = client_mac(lab, "c4")?;
        // c4 gave up its own address for c1's: the server's table no longer has c4 at all.
        for p in PORTS {
            lab.ip("srv", &["neigh", "del", "198.18.0.14", "dev", p])?;
        }
        for c in ["c2", "c4"] {
            lab.place(c, PORTS[0])?;
        }
        // 2 x 45 Mbit/s on p0 (cap 100): overloaded, and both could move.
        let mut senders = vec![
            udp_from(lab, "c2", new_mac, "198.18.0.12", PORTS[0], 45, 12)?,
            udp_from(lab, "c4", &c4_mac, "198.18.0.11", PORTS[0], 45, 12)?,
        ];
        check_unconfirmed_stay(lab, &d, new_mac, &c4_mac, &mut failures)?;
        // The kernel learns c2's new MAC: now rlbd may steer it.
        for p in PORTS {
            lab.ip(
                "srv",
                &[
                    "neigh",
                    "replace",
                    "198.18.0.12",
                    "lladdr",
                    new_mac,
                    "dev",
                    p,
                    "nud",
                    "permanent",
                ],
            )?;
        }
        let moved = watch_move(
            lab,
            &["c2"],
            PORTS[0],
            Instant::now() + Duration::from_secs(6),
            || true,
        )?;
        say!("after the table confirms {new_mac} for 198.18.0.12: {moved:?}");
        if moved.is_none() {
            failures.push("c2 not moved within 6 s once the table confirms its new MAC".into());
        }
        if lab.client_port("c4")? != Some(PORTS[0]) {
            failures.push("c4 (sending as c1's address) was steered".into());
        }
        for c in &mut senders {
            let _ = lab.stop_child(c, Duration::from_millis(500));
        }
        finish(lab, &mut d, &mut [], log);
        Ok(failures)
    });
}

/// For 7 s, neither unconfirmed sender (c2 at `new_mac`, c4 at `c4_mac`) is steered off
/// the overloaded p0, and no update is sent.
fn check_unconfirmed_stay(
    lab: &Lab,
    d: &Daemon,
    new_mac: &str,
    c4_mac: &str,
    failures: &mut Vec<String>,
) -> LabResult<()> {
    let t = Instant::now();
    let mut steered = Vec::new();
    let mut seen_overload = false;
    while t.elapsed() < Duration::from_secs(7) {
        for c in ["c2", "c4"] {
            if lab.client_port(c)? != Some(PORTS[0]) {
                steered.push(format!("{c} at {:.1} s", t.elapsed().as_secs_f64()));
            }
        }
        let s = status(d)?;
        seen_overload |= s.ports[0].overloaded;
        for c in &s.clients {
            if c.moved.is_some() && (c.mac == new_mac || c.mac == c4_mac) {
                steered.push(format!("status shows {} ({}) moved", c.mac, c.ip));
            }
        }
        lab.sleep(Duration::from_millis(250))?;
    }
    let s = status(d)?;
    say!(
        "unconfirmed senders on p0 for 7 s: overloaded {seen_overload}, updates sent {}, \
         steered: {steered:?}",
        s.totals.updates_sent
    );
    if !seen_overload {
        failures.push("p0 never overloaded: nothing was put to the test".into());
    }
    if !steered.is_empty() || s.totals.updates_sent > 0 {
        failures.push(format!(
            "an unconfirmed MAC was steered ({} updates sent): {steered:?}",
            s.totals.updates_sent
        ));
    }
    Ok(())
}
