//! `[clients]` in the namespace lab (root): c4, which starts on p1, is pinned to p0; c1 is
//! excluded. With c1 and c4 both sending at full rate, rlbd places c4 on p0, which overloads
//! it while p1 idles; without `[clients]` it would move one of them to p1 (tests/netns.rs),
//! here it moves neither and sends c1 no frame; `rlbd status` marks both.
//! Then a pin to a port the daemon does not have is refused at start with exit 78, naming the
//! file, line and key.
//!
//! Run with `-- --test-threads=1 --nocapture` to see the figures.

#[macro_use]
mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::daemon::{finish, lab_test, start, status, tmp};
use common::{exe, fmt_rates, lab_exe, measure, Checks};
use rlbd_lab::netns::{Lab, LabResult, PORTS};
use rlbd_lab::scenario::{start_sink, start_sources};

const CAP: u32 = common::daemon::CAP;
const CONFIG: &str = "[clients]\n\
    # c1: a gateway, say\n\
    exclude = [\"198.18.0.11\"]\n\
    \n\
    [clients.pin]\n\
    \"198.18.0.14\" = \"p0\"\n";

#[test]
fn lab_a_pinned_client_is_placed_on_its_port_and_an_excluded_one_never_moves() {
    lab_test("pinned-clients", scenario);
}

fn scenario(lab: &Lab, log: &Path) -> LabResult<Vec<String>> {
    let mut checks = Checks::default();
    let cfg = tmp(&format!("{}-clients.toml", lab.prefix()));
    std::fs::write(&cfg, CONFIG).map_err(|e| e.to_string())?;
    let cfg_arg = cfg.to_string_lossy().into_owned();
    let _sink = start_sink(lab, lab_exe())?;
    for c in ["c1", "c4"] {
        say!("before rlbd: {c} uses {:?}", lab.client_port(c)?);
    }
    let mut d = start(lab, "pinned", &[], &["-v", "--config", &cfg_arg])?;
    let t0 = Instant::now();
    let mut sources = start_sources(lab, lab_exe(), &["c1", "c4"], 16.0)?;
    let watched = watch(lab, Duration::from_secs(12));
    let rates = watched
        .as_ref()
        .ok()
        .map(|_| measure(lab, Duration::from_secs(2)));
    let report = status(&d);
    finish(lab, &mut d, &mut sources, log);
    let _ = std::fs::remove_file(&cfg);
    let w = watched?;
    let rates = rates.unwrap_or_else(|| Err("not measured".into()))?;
    say!(
        "c4 (pinned to p0, started on p1) on p0 after {:?} s",
        w.c4_on_p0
    );
    say!(
        "c1 (excluded) polled {} times over {:.0} s: off p0 {} times",
        w.polls,
        t0.elapsed().as_secs_f64(),
        w.c1_off.len()
    );
    say!("p0 overloaded, the last 2 s: {}", fmt_rates(CAP, &rates));
    checks.check(
        w.c4_on_p0.is_some_and(|t| t < 5.0),
        format!(
            "c4 placed on its pinned port p0 within 5 s ({:?})",
            w.c4_on_p0
        ),
    );
    checks.check(
        w.c4_off_after.is_empty(),
        format!("c4 stays on p0 once there ({:?})", w.c4_off_after),
    );
    checks.check(
        w.c1_off.is_empty(),
        format!("c1 never leaves p0 ({:?})", w.c1_off),
    );
    checks.check(
        rates[0] > 0.8 * f64::from(CAP) && rates[1] < 0.1 * f64::from(CAP),
        format!(
            "p0 stays overloaded, p1 idle: nothing could move ({})",
            fmt_rates(CAP, &rates)
        ),
    );
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let c1_lines: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.contains("198.18.0.11") && (l.contains("move ") || l.contains("re-asserting"))
        })
        .collect();
    checks.check(
        c1_lines.is_empty(),
        format!("no move or update of c1 in the log ({c1_lines:?})"),
    );
    checks.check(
        text.contains("pinned to p0 in [clients]"),
        "the log says why c4 moved".into(),
    );
    marks(report?, &mut checks);
    refused_at_start(lab, &mut checks)?;
    Ok(checks.0)
}

/// What the clients' neighbour entries showed while the traffic ran.
struct Watched {
    polls: usize,
    c4_on_p0: Option<f64>,
    c4_off_after: Vec<String>,
    c1_off: Vec<String>,
}

/// Polls every 100 ms for `span`: where c1 and c4 send.
fn watch(lab: &Lab, span: Duration) -> LabResult<Watched> {
    let t = Instant::now();
    let mut w = Watched {
        polls: 0,
        c4_on_p0: None,
        c4_off_after: Vec::new(),
        c1_off: Vec::new(),
    };
    while t.elapsed() < span {
        let s = t.elapsed().as_secs_f64();
        let (c1, c4) = (lab.client_port("c1")?, lab.client_port("c4")?);
        w.polls += 1;
        if c1 != Some(PORTS[0]) {
            w.c1_off.push(format!("{s:.1}s:{c1:?}"));
        }
        match (c4 == Some(PORTS[0]), w.c4_on_p0) {
            (true, None) => w.c4_on_p0 = Some(s),
            (false, Some(_)) => w.c4_off_after.push(format!("{s:.1}s:{c4:?}")),
            _ => {}
        }
        lab.sleep(Duration::from_millis(100))?;
    }
    Ok(w)
}

/// `rlbd status` marks c4 pinned to p0 and c1 excluded (and c1 unmoved).
fn marks(r: rlbd::status::StatusReport, checks: &mut Checks) {
    let row = |ip: &str| r.clients.iter().find(|c| c.ip == ip).cloned();
    let (c1, c4) = (row("198.18.0.11"), row("198.18.0.14"));
    say!(
        "status: c1 excluded={:?} moved={:?}; c4 pinned={:?}; p0 overloaded={:?}; moves {} overload, {} placement",
        c1.as_ref().map(|c| c.excluded),
        c1.as_ref().map(|c| c.moved.is_some()),
        c4.as_ref().map(|c| c.pinned.clone()),
        r.ports.first().map(|p| p.overloaded),
        r.totals.moves_overload,
        r.totals.moves_placement
    );
    checks.check(
        c1.as_ref().is_some_and(|c| c.excluded && c.moved.is_none()),
        "status marks c1 excluded, not moved".into(),
    );
    checks.check(
        c4.as_ref()
            .is_some_and(|c| c.pinned.as_deref() == Some("p0")),
        "status marks c4 pinned to p0".into(),
    );
}

/// A pin to p9 (not one of `--ports p0,p1`): `rlbd run` exits 78 naming file:line:key.
fn refused_at_start(lab: &Lab, checks: &mut Checks) -> LabResult<()> {
    let cfg = tmp(&format!("{}-bad-pin.toml", lab.prefix()));
    let text = "[clients]\nexclude = [\"198.18.0.11\"]\npin = { \"198.18.0.14\" = \"p9\" }\n";
    std::fs::write(&cfg, text).map_err(|e| e.to_string())?;
    let out = tmp(&format!("{}-bad-pin.out", lab.prefix()));
    let file = std::fs::File::create(&out).map_err(|e| e.to_string())?;
    let twin = file.try_clone().map_err(|e| e.to_string())?;
    let exe = exe().to_string_lossy();
    let cfg_arg = cfg.to_string_lossy();
    let args = [&*exe, "run", "--ports", "p0,p1", "--config", &cfg_arg];
    let mut child = lab.spawn_with("srv", &args, Stdio::from(file), Stdio::from(twin))?;
    let status = lab.wait_child(&mut child, Duration::from_secs(5))?;
    if status.is_none() {
        let _ = lab.stop_child(&mut child, Duration::from_millis(500));
    }
    let said = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&cfg);
    let _ = std::fs::remove_file(&out);
    let want = format!("{cfg_arg}:3: clients.pin.\"198.18.0.14\": p9 is not a port");
    say!("a pin to p9: {status:?}, said {:?}", said.trim());
    checks.check(
        status.and_then(|s| s.code()) == Some(78) && said.contains(&want),
        format!("a pin to p9 exits 78 naming {want:?}"),
    );
    Ok(())
}
