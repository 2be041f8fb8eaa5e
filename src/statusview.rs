//! The client side of the control socket: `rlbd status` and `rlbd metrics` (the protocol is in
//! `crate::protocol`, the daemon's side in `daemon::control`).

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::{MetricsArgs, StatusArgs};
use crate::exit::EX_UNAVAILABLE;
use crate::protocol::{Request, CONTROL_DIR, MAX_RESPONSE};
use crate::status::{Mode, PortStatus, StatusReport};

const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// A failed query: the message and the exit code it maps to.
#[derive(Debug)]
pub struct ClientError {
    pub code: u8,
    pub message: String,
}

impl ClientError {
    fn unavailable(message: impl Into<String>) -> Self {
        ClientError {
            code: EX_UNAVAILABLE,
            message: message.into(),
        }
    }
    fn other(message: impl Into<String>) -> Self {
        ClientError {
            code: 1,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The socket to ask: `explicit` if given, else `dir/NAME.sock`, else the only socket in `dir`.
pub fn find_socket(
    dir: &Path,
    name: Option<&str>,
    explicit: Option<&Path>,
) -> Result<PathBuf, ClientError> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    let running = sockets_in(dir);
    let list = || {
        if running.is_empty() {
            "none is running".to_string()
        } else {
            format!("running: {}", running.join(", "))
        }
    };
    match name {
        Some(n) if n.is_empty() || n.contains('/') => {
            Err(ClientError::other(format!("{n:?} is not a bond or port name")))
        }
        Some(n) => {
            let p = dir.join(format!("{n}.sock"));
            if p.exists() {
                Ok(p)
            } else {
                Err(ClientError::unavailable(format!(
                    "no rlbd for {n}: {} does not exist ({})",
                    p.display(),
                    list()
                )))
            }
        }
        None => match running.as_slice() {
            [one] => Ok(dir.join(format!("{one}.sock"))),
            [] => Err(ClientError::unavailable(format!(
                "no rlbd control socket in {} (is rlbd running? give --socket PATH if it uses another)",
                dir.display()
            ))),
            _ => Err(ClientError::other(format!(
                "several rlbd daemons are running ({}); name one, e.g. `rlbd status {}`",
                running.join(", "),
                running[0]
            ))),
        },
    }
}

/// Names (without `.sock`) of the sockets in `dir`, sorted.
fn sockets_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".sock"))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// Sends one request and returns the whole answer (an `error:` answer is an error).
pub fn request(path: &Path, what: Request) -> Result<String, ClientError> {
    let mut s = UnixStream::connect(path).map_err(|e| {
        let msg = format!("cannot connect to {}: {e}", path.display());
        match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                ClientError::unavailable(format!("{msg} (is rlbd running?)"))
            }
            std::io::ErrorKind::PermissionDenied => {
                ClientError::other(format!("{msg} (run as root or as a member of its group)"))
            }
            _ => ClientError::other(msg),
        }
    })?;
    let io = |e: std::io::Error| ClientError::other(format!("{}: {e}", path.display()));
    s.set_read_timeout(Some(IO_TIMEOUT)).map_err(io)?;
    s.set_write_timeout(Some(IO_TIMEOUT)).map_err(io)?;
    s.write_all(what.line().as_bytes()).map_err(io)?;
    let buf = read_answer(&mut s, MAX_RESPONSE + 1).map_err(io)?;
    if buf.len() > MAX_RESPONSE {
        return Err(ClientError::other(format!(
            "{}: the answer is larger than {MAX_RESPONSE} bytes",
            path.display()
        )));
    }
    let text = String::from_utf8(buf)
        .map_err(|_| ClientError::other(format!("{}: the answer is not UTF-8", path.display())))?;
    if let Some(msg) = text.strip_prefix("error:") {
        return Err(ClientError::other(format!(
            "rlbd ({}): {}",
            path.display(),
            msg.trim()
        )));
    }
    if text.is_empty() {
        return Err(ClientError::other(format!(
            "{}: the daemon closed the connection without an answer",
            path.display()
        )));
    }
    Ok(text)
}

/// Reads to end of file (at most `limit` bytes). A reset after some bytes arrived counts as the
/// end: the daemon closes a connection whose request it did not read whole (one it refuses, or
/// one that sent more than a line), and the kernel then reports a reset after the answer.
pub fn read_answer(s: &mut impl Read, limit: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    while buf.len() < limit {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n.min(limit - buf.len())]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && !buf.is_empty() => break,
            Err(e) => return Err(e),
        }
    }
    Ok(buf)
}

/// Asks for the status (the busiest `top` clients, or all); returns the parsed report and the
/// JSON as the daemon sent it.
pub fn fetch_status(
    path: &Path,
    top: Option<usize>,
) -> Result<(StatusReport, String), ClientError> {
    let text = request(path, Request::Status { top })?;
    let report = serde_json::from_str(&text)
        .map_err(|e| ClientError::other(format!("{}: not a status report: {e}", path.display())))?;
    Ok((report, text))
}

/// `rlbd status`.
pub fn main_status(args: &StatusArgs) -> Result<(), ClientError> {
    let path = find_socket(
        Path::new(CONTROL_DIR),
        args.name.as_deref(),
        args.socket.as_deref(),
    )?;
    let top = if args.all { None } else { Some(args.top) };
    let show = |(report, raw): (StatusReport, String)| {
        if args.json {
            // As sent: a newer daemon's extra fields are kept.
            println!("{}", raw.trim_end());
        } else {
            print!("{}", render_text(&report, top));
        }
    };
    if !args.watch {
        show(fetch_status(&path, top)?);
        return Ok(());
    }
    loop {
        let got = fetch_status(&path, top);
        if !args.json {
            // Home, clear screen: redraw in place.
            print!("\x1b[H\x1b[2J");
            println!(
                "rlbd status --watch: {} every 1 s, Ctrl-C to stop\n",
                path.display()
            );
        }
        match got {
            Ok(r) => show(r),
            Err(e) => println!("{e}"),
        }
        let _ = std::io::stdout().flush();
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// `rlbd metrics`.
pub fn main_metrics(args: &MetricsArgs) -> Result<(), ClientError> {
    let path = find_socket(
        Path::new(CONTROL_DIR),
        args.name.as_deref(),
        args.socket.as_deref(),
    )?;
    print!("{}", request(&path, Request::Metrics)?);
    Ok(())
}

/// `[#####.....]`: `util` of `width` cells, clamped to full; `[----------]` with no reading.
pub fn bar(util: Option<f64>, width: usize) -> String {
    match util.filter(|u| u.is_finite()) {
        Some(u) => {
            let filled = ((u * width as f64).round().max(0.0) as usize).min(width);
            format!("[{}{}]", "#".repeat(filled), ".".repeat(width - filled))
        }
        None => format!("[{}]", "-".repeat(width)),
    }
}

/// A rate in bit/s with a unit.
pub fn rate(bps: f64) -> String {
    let (v, unit) = if bps >= 1e9 {
        (bps / 1e9, "Gbit/s")
    } else if bps >= 1e6 {
        (bps / 1e6, "Mbit/s")
    } else if bps >= 1e3 {
        (bps / 1e3, "kbit/s")
    } else {
        (bps, "bit/s")
    };
    format!("{v:.1} {unit}")
}

/// A duration in seconds, short: `42 s`, `3m 05s`, `2h 03m`, `4d 01h`.
pub fn duration(secs: u64) -> String {
    match secs {
        0..=59 => format!("{secs} s"),
        60..=3599 => format!("{}m {:02}s", secs / 60, secs % 60),
        3600..=86_399 => format!("{}h {:02}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d {:02}h", secs / 86_400, secs % 86_400 / 3600),
    }
}

/// Left-aligned columns separated by two spaces; columns in `right` are right-aligned.
fn table(rows: &[Vec<String>], right: &[usize]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            let pad = widths[c].saturating_sub(cell.chars().count());
            if right.contains(&c) {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                if c + 1 < row.len() {
                    line.push_str(&" ".repeat(pad));
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// How a port counts, for people: "ebpf" (every frame, in the kernel; "ebpf/tc" at the tc
/// hooks), "all" captured frames, or "1/N" of them.
fn counted(p: &PortStatus) -> String {
    let ebpf = match p.counting_hook.as_deref() {
        Some("tc") => "ebpf/tc",
        _ => "ebpf",
    };
    if p.counting == "ebpf" && p.uncounted_frames > 0 {
        // The map was full at some point: say so where the operator looks.
        format!("{ebpf} full")
    } else if p.counting == "ebpf" {
        ebpf.into()
    } else if p.sampling <= 1 {
        "all".into()
    } else {
        format!("1/{}", p.sampling)
    }
}

fn port_row(p: &PortStatus) -> Vec<String> {
    let pct = p
        .utilization
        .filter(|u| u.is_finite())
        .map_or_else(|| "-".into(), |u| format!("{:.0}%", u * 100.0));
    vec![
        p.name.clone(),
        p.mac.clone(),
        p.state.as_str().to_string(),
        rate(p.capacity_bps),
        p.rx_bps.map_or_else(|| "-".into(), rate),
        format!("{} {pct:>4}", bar(p.utilization, 10)),
        if p.overloaded {
            format!("{} overloaded", p.window)
        } else {
            p.window.clone()
        },
        p.ring_drops.to_string(),
        counted(p),
        p.clients.to_string(),
    ]
}

/// The text form of `rlbd status`: ports, the `top` clients by rate (all with `None`), totals.
pub fn render_text(r: &StatusReport, top: Option<usize>) -> String {
    let mut out = header(r);
    out.push_str(&ports_table(r));
    out.push_str(&clients_table(r, top));
    out.push_str(&totals_line(r));
    out
}

fn header(r: &StatusReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "rlbd {} on {} {} (up {}{})",
        r.version,
        if r.mode == Mode::Bond {
            "bond"
        } else {
            "ports of"
        },
        r.name,
        duration(r.uptime_secs),
        if r.dry_run {
            "; dry run: nothing is sent"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "overloaded: over {:.0}% in {} of the last {} seconds; moved clients stay put {}",
        r.threshold * 100.0,
        r.hits,
        r.window,
        duration(r.hold_down_secs)
    );
    out.push('\n');
    out
}

fn ports_table(r: &StatusReport) -> String {
    let mut rows = vec![[
        "PORT",
        "MAC",
        "STATE",
        "CAPACITY",
        "RX NOW",
        "UTILIZATION",
        "WINDOW",
        "RING DROPS",
        "COUNTED",
        "CLIENTS",
    ]
    .map(String::from)
    .to_vec()];
    rows.extend(r.ports.iter().map(port_row));
    let mut out = table(&rows, &[3, 4, 7, 8, 9]);
    for p in &r.ports {
        if let Some(why) = &p.no_move {
            let _ = writeln!(out, "{}: overloaded, nothing moved: {why}", p.name);
        }
    }
    out
}

fn clients_table(r: &StatusReport, top: Option<usize>) -> String {
    let mut out = String::new();
    out.push('\n');
    // The daemon may have sent only the busiest (status top=N); the totals count them all.
    let tracked = r.totals.clients_tracked.max(r.clients.len());
    let shown = top.unwrap_or(usize::MAX).min(r.clients.len());
    let _ = writeln!(
        out,
        "CLIENTS: {} tracked{}",
        tracked,
        if shown < tracked {
            format!(", the {shown} busiest shown (--all for every one)")
        } else {
            String::new()
        }
    );
    if shown > 0 {
        let mut rows = vec![["IP", "MAC", "VLAN", "PORT", "RATE", "MOVED"]
            .map(String::from)
            .to_vec()];
        for c in r.clients.iter().take(shown) {
            let moved = match &c.moved {
                None => "-".to_string(),
                Some(m) => {
                    let mut s = format!(
                        "to {} {} ago ({})",
                        m.to,
                        duration(m.secs_ago),
                        m.reason.as_str()
                    );
                    if m.hold_down_left_secs > 0 {
                        let _ = write!(s, ", held {} more", duration(m.hold_down_left_secs));
                    }
                    if m.addresses.len() > 1 {
                        let _ = write!(s, ", for {}", m.addresses.join(" "));
                    }
                    if m.reasserts > 0 {
                        let _ = write!(
                            s,
                            ", re-asserted {} time{}",
                            m.reasserts,
                            if m.reasserts == 1 { "" } else { "s" }
                        );
                    }
                    s
                }
            };
            rows.push(vec![
                c.ip.clone(),
                c.mac.clone(),
                if c.vlan == 0 {
                    "-".into()
                } else {
                    c.vlan.to_string()
                },
                c.port.clone(),
                rate(c.rate_bps),
                moved,
            ]);
        }
        out.push_str(&table(&rows, &[4]));
    }

    out
}

fn totals_line(r: &StatusReport) -> String {
    let mut out = String::new();
    out.push('\n');
    let t = &r.totals;
    let _ = writeln!(
        out,
        "TOTALS: moves {} (overload {}, failover {}, placement {}); re-assertions {}; updates sent {}, \
         suppressed {}; table {}/{}, evictions {}, expirations {}",
        t.moves_overload + t.moves_failover + t.moves_placement,
        t.moves_overload,
        t.moves_failover,
        t.moves_placement,
        t.reasserts,
        t.updates_sent,
        t.updates_suppressed,
        t.clients_tracked,
        t.table_capacity,
        t.table_evictions,
        t.table_expirations
    );
    // Only when something went wrong: a quiet report stays short.
    if t.send_errors + t.unreliable_seconds + t.netlink_resyncs + t.foreign_claims > 0 {
        let _ = writeln!(
            out,
            "TROUBLE: send errors {} (retried {}); seconds with ring drops (no moves) {}; \
             netlink resyncs {}; foreign claims of our addresses {}",
            t.send_errors,
            t.send_retries,
            t.unreliable_seconds,
            t.netlink_resyncs,
            t.foreign_claims
        );
    }
    out
}

#[cfg(test)]
#[path = "statusview_tests.rs"]
mod tests;
