//! The client side of the control socket: `rlbd status` and `rlbd metrics` (the protocol is in
//! `crate::protocol`, the daemon's side in `daemon::control`).

use std::io::{Read, Write};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::{MetricsArgs, StatusArgs};
use crate::exit::Failure;
use crate::protocol::{Request, CONTROL_DIR, MAX_RESPONSE};
use crate::status::StatusReport;

mod text;
pub use text::{bar, duration, rate, render_text};

const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// The socket to ask: `explicit` if given, else `dir/NAME.sock`, else the only socket in `dir`.
pub fn find_socket(
    dir: &Path,
    name: Option<&str>,
    explicit: Option<&Path>,
) -> Result<PathBuf, Failure> {
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
        Some(n) if crate::config::interface_name_error(n).is_some() => Err(Failure::other(
            format!("{n:?} is not a bond or port name"),
        )),
        Some(n) => {
            let p = dir.join(format!("{n}.sock"));
            if p.exists() {
                Ok(p)
            } else {
                Err(Failure::unavailable(format!(
                    "no rlbd for {n}: {} does not exist ({})",
                    p.display(),
                    list()
                )))
            }
        }
        None => match running.as_slice() {
            [one] => Ok(dir.join(format!("{one}.sock"))),
            [] => Err(Failure::unavailable(format!(
                "no rlbd control socket in {} (is rlbd running? give --socket PATH if it uses another)",
                dir.display()
            ))),
            _ => Err(Failure::other(format!(
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
pub fn request(path: &Path, what: Request) -> Result<String, Failure> {
    let text = exchange(path, what)?;
    if let Some(msg) = text.strip_prefix("error:") {
        return Err(Failure::other(format!(
            "rlbd ({}): {}",
            path.display(),
            msg.trim()
        )));
    }
    Ok(text)
}

/// Sends one request and returns the whole answer, `error:` answers included.
fn exchange(path: &Path, what: Request) -> Result<String, Failure> {
    let mut s = UnixStream::connect(path).map_err(|e| {
        let msg = format!("cannot connect to {}: {e}", path.display());
        match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                Failure::unavailable(format!("{msg} (is rlbd running?)"))
            }
            std::io::ErrorKind::PermissionDenied => {
                Failure::other(format!("{msg} (run as root or as a member of its group)"))
            }
            _ => Failure::other(msg),
        }
    })?;
    let io = |e: std::io::Error| Failure::other(format!("{}: {e}", path.display()));
    s.set_read_timeout(Some(IO_TIMEOUT)).map_err(io)?;
    s.set_write_timeout(Some(IO_TIMEOUT)).map_err(io)?;
    s.write_all(what.line().as_bytes()).map_err(io)?;
    let buf = read_answer(&mut s, MAX_RESPONSE + 1).map_err(io)?;
    if buf.len() > MAX_RESPONSE {
        return Err(Failure::other(format!(
            "{}: the answer is larger than {MAX_RESPONSE} bytes",
            path.display()
        )));
    }
    let text = String::from_utf8(buf)
        .map_err(|_| Failure::other(format!("{}: the answer is not UTF-8", path.display())))?;
    if text.is_empty() {
        return Err(Failure::other(format!(
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
pub fn fetch_status(path: &Path, top: Option<usize>) -> Result<(StatusReport, String), Failure> {
    let text = request(path, Request::Status { top })?;
    let report = serde_json::from_str(&text)
        .map_err(|e| Failure::other(format!("{}: not a status report: {e}", path.display())))?;
    Ok((report, text))
}

/// `rlbd status`.
pub fn main_status(args: &StatusArgs) -> Result<(), Failure> {
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
pub fn main_metrics(args: &MetricsArgs) -> Result<(), Failure> {
    let path = find_socket(
        Path::new(CONTROL_DIR),
        args.name.as_deref(),
        args.socket.as_deref(),
    )?;
    print!("{}", request(&path, Request::Metrics)?);
    Ok(())
}

/// `rlbd reload`: asks the daemon to reload and returns what it did. A refused file is exit
/// status 78 (a configuration error), as `rlbd check-config` gives for it.
pub fn main_reload(args: &MetricsArgs) -> Result<String, Failure> {
    let path = find_socket(
        Path::new(CONTROL_DIR),
        args.name.as_deref(),
        args.socket.as_deref(),
    )?;
    reload(&path)
}

/// Asks the daemon at `path` to reload; see [`main_reload`].
pub fn reload(path: &Path) -> Result<String, Failure> {
    let text = exchange(path, Request::Reload)?;
    let text = text.trim();
    if let Some(done) = text.strip_prefix("ok:") {
        return Ok(done.trim().to_string());
    }
    let code = if text.contains("configuration not reloaded") {
        crate::exit::EX_CONFIG
    } else {
        1
    };
    Err(Failure {
        code,
        message: format!(
            "rlbd ({}): {}",
            path.display(),
            text.strip_prefix("error:").unwrap_or(text).trim()
        ),
    })
}

#[cfg(test)]
mod tests;
