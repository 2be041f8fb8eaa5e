//! The operator's path end to end: `rlbd reload` against a running daemon (root: its ports
//! are made in a network namespace of its own), and where error lines land when stderr is the
//! journal (no root).
//!
//! The reload test is root-gated like tests/netns.rs: without root it prints "skipped: needs
//! root" and passes, unless `CI=true` or `RLBD_REQUIRE_ROOT_TESTS=1` is set, which fails it.

#[macro_use]
mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use common::{exe, root_or_skip, wait_for_log};

/// `rlbd ARGS` with stderr into a file, and `JOURNAL_STREAM` naming that file (`real`) or
/// another (not stderr: the variable a child inherits from a service whose stderr it does not
/// share); returns the exit code and what was written.
fn run_with_journal_stream(args: &[&str], real: bool, tag: &str) -> (Option<i32>, String) {
    use std::os::unix::fs::MetadataExt;
    let path = std::env::temp_dir().join(format!("rlbd-js-{tag}-{}", std::process::id()));
    let file = std::fs::File::create(&path).expect("stderr file");
    let m = file.metadata().expect("stat");
    let stream = if real {
        format!("{}:{}", m.dev(), m.ino())
    } else {
        format!("{}:{}", m.dev(), m.ino() + 1)
    };
    let status = Command::new(exe())
        .args(args)
        .env("JOURNAL_STREAM", stream)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(file))
        .status()
        .expect("starting rlbd");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    (status.code(), text)
}

#[test]
fn under_systemd_log_lines_carry_priority_and_no_timestamp() {
    let missing = ["run", "--config", "/dev/null", "--bond", "nosuchbond"];
    let (code, stderr) = run_with_journal_stream(&missing, true, "real");
    say!("with JOURNAL_STREAM naming stderr: {}", stderr.trim());
    assert_eq!(code, Some(69));
    assert!(
        stderr.starts_with("<3>bond nosuchbond does not exist"),
        "journal form: <priority>message, no timestamp: {stderr}"
    );
    // An error before logging starts (the configuration) is at err too.
    let dir = std::env::temp_dir().join(format!("rlbd-js-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("bad.toml");
    std::fs::write(&cfg, "[policy]\nthreshold = \"high\"\n").unwrap();
    let cfg_s = cfg.to_string_lossy();
    let bad = ["run", "--config", &cfg_s, "--bond", "nosuchbond"];
    let (code, stderr) = run_with_journal_stream(&bad, true, "early");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, Some(78));
    assert_eq!(
        stderr.trim_end(),
        format!(
            "<3>rlbd run: {cfg_s}:2: policy.threshold: expected a number, found the string \"high\""
        )
    );
    // JOURNAL_STREAM naming something else than stderr is not trusted.
    let (code, stderr) = run_with_journal_stream(&missing, false, "other");
    assert_eq!(code, Some(69));
    assert!(
        stderr.starts_with("20") && stderr.contains(" ERROR bond nosuchbond does not exist"),
        "terminal form: timestamp, level, message: {stderr}"
    );
    let out = Command::new(exe())
        .args(missing)
        .env_remove("JOURNAL_STREAM")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("starting rlbd");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("20") && stderr.contains(" ERROR bond nosuchbond does not exist"),
        "terminal form: timestamp, level, message: {stderr}"
    );
}

#[test]
fn an_escaped_bond_name_is_refused_with_78_and_the_enable_line() {
    // What `rlbd@bond\x2dsan` would run were the unit to pass %i instead of %I.
    for cmd in [
        &["run", "--config", "/dev/null", "--bond", r"bond\x2dsan"][..],
        &["check-config", "--bond", r"bond\x2dsan"],
    ] {
        let (code, out, err) = rlbd(cmd);
        say!("rlbd {}: exit {code:?}: {err}", cmd.join(" "));
        assert_eq!(code, Some(78), "{out}{err}");
        assert!(
            err.contains(r#"bond name "bond\x2dsan" looks escaped"#),
            "{err}"
        );
        assert!(
            err.contains(r#"systemctl enable "rlbd@$(systemd-escape bond-san)""#),
            "{err}"
        );
    }
    // The plain name goes on to look for the bond (69: it does not exist here).
    let (code, _, err) = rlbd(&["run", "--config", "/dev/null", "--bond", "rlbd-no-san"]);
    assert_eq!(code, Some(69), "{err}");
    assert!(err.contains("bond rlbd-no-san does not exist"), "{err}");
}

#[test]
fn command_line_mistakes_exit_64_and_say_what_is_wrong() {
    for mistake in [
        &[][..],
        &["run", "--no-such-option"],
        &["status", "--top", "many"],
        &["run", "--bond", "b0", "--ports", "eth0"],
    ] {
        let (code, out, err) = rlbd(mistake);
        say!("rlbd {}: exit {code:?}", mistake.join(" "));
        assert_eq!(code, Some(64), "{mistake:?}: {out}{err}");
        assert!(out.is_empty(), "{mistake:?}: nothing on stdout: {out}");
        // The usage, or what is wrong and where to read more.
        assert!(
            err.contains("Usage: rlbd") || (err.starts_with("error: ") && err.contains("--help")),
            "{mistake:?}: {err}"
        );
    }
    for asked in [&["--help"][..], &["run", "--help"], &["--version"]] {
        let (code, out, err) = rlbd(asked);
        assert_eq!(code, Some(0), "{asked:?}: {err}");
        assert!(
            out.starts_with("Usage: rlbd")
                || out.starts_with("rlbd ")
                || out.contains("\nUsage: rlbd"),
            "{asked:?}: {out}"
        );
    }
}

/// The daemon under test, killed (and its namespace with it) however the test ends.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `rlbd run` with `args` (split on spaces) on two veth ports in a network namespace of its own
/// (gone with the daemon), its stderr into `log`; returns once it is running.
fn start_on_veths(args: &str, log: &std::path::Path) -> Daemon {
    let script = format!(
        "ip link add a0 type veth peer name a1; ip link set a0 up; ip link set a1 up; \
         ip addr add 198.18.1.1/24 dev a0; ip addr add 198.18.1.1/24 dev a1; \
         sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.a0.rp_filter=0 net.ipv4.conf.a1.rp_filter=0\n\
         exec {} run --ports a0,a1 --capacity a0=100 --capacity a1=100 {args}",
        exe().display(),
    );
    let daemon = Daemon(
        Command::new("unshare")
            .args(["--net", "sh", "-ec", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("unshare"),
    );
    assert!(
        wait_for_log(log, "ports: a0 a1", 10),
        "the daemon did not start:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
    daemon
}

/// `rlbd ARGS`: exit code, stdout, stderr.
fn rlbd(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(exe()).args(args).output().expect("rlbd");
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn rlbd_reload_applies_a_good_file_and_refuses_a_bad_one_with_78() {
    if !root_or_skip() {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("operator-reload-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (cfg, log, sock) = (
        dir.join("rlbd.toml"),
        dir.join("rlbd.log"),
        dir.join("rlbd.sock"),
    );
    std::fs::write(&cfg, "[policy]\nthreshold = 0.8\n").unwrap();
    let args = format!(
        "--config {} --control-socket {}",
        cfg.display(),
        sock.display()
    );
    let mut daemon = start_on_veths(&args, &log);
    let sock_s = sock.to_string_lossy().into_owned();
    let threshold = || {
        let (code, json, err) = rlbd(&["status", "--json", "--socket", &sock_s]);
        assert_eq!(code, Some(0), "{err}");
        serde_json::from_str::<serde_json::Value>(&json).unwrap()["threshold"].as_f64()
    };

    std::fs::write(&cfg, "[policy]\nthreshold = 0.7\n").unwrap();
    let (code, out, err) = rlbd(&["reload", "--socket", &sock_s]);
    say!("good file: exit {code:?}: {out}{err}");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        format!(
            "rlbd reload: configuration reloaded from {}; state kept",
            cfg.display()
        )
    );
    assert_eq!(threshold(), Some(0.7));

    std::fs::write(&cfg, "[policy]\nthreshold = \"high\"\n").unwrap();
    let (code, out, err) = rlbd(&["reload", "--socket", &sock_s]);
    say!("bad file: exit {code:?}: {out}{err}");
    assert_eq!(code, Some(78));
    let why = format!(
        "configuration not reloaded: {}:2: policy.threshold: expected a number, found the \
         string \"high\"; running on with the settings it had",
        cfg.display()
    );
    assert_eq!(err, format!("rlbd reload: rlbd ({sock_s}): {why}"));
    assert!(wait_for_log(
        &log,
        &format!("ERROR reload request: {why}"),
        5
    ));
    assert!(daemon.0.try_wait().unwrap().is_none(), "the daemon runs on");
    assert_eq!(threshold(), Some(0.7), "with the settings it had");

    // No daemon: 69, as `rlbd status` gives.
    drop(daemon);
    let (code, _, err) = rlbd(&["reload", "--socket", &sock_s]);
    assert_eq!(code, Some(69), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_clean_stop_removes_the_metrics_file() {
    if !root_or_skip() {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("operator-stop-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (log, sock, prom) = (
        dir.join("rlbd.log"),
        dir.join("rlbd.sock"),
        dir.join("rlbd.prom"),
    );
    let args = format!(
        "--config /dev/null --control-socket {} --metrics-file {} --metrics-interval 1",
        sock.display(),
        prom.display()
    );
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let mut daemon = start_on_veths(&args, &log);
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !prom.exists() && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let text = std::fs::read_to_string(&prom).unwrap_or_default();
        assert!(
            text.contains("rlbd_uptime_seconds"),
            "the metrics file is written: {text:?}"
        );
        // SAFETY: kill(2) on the daemon this test started (unshare and sh exec'd into it).
        unsafe { libc::kill(daemon.0.id() as i32, sig) };
        let status = daemon.0.wait().expect("wait");
        let stderr = std::fs::read_to_string(&log).unwrap_or_default();
        say!("{name}: {status}; metrics file left: {}", prom.exists());
        assert!(status.success(), "{name}: a clean exit: {status}\n{stderr}");
        assert!(!prom.exists(), "{name}: the metrics file is removed");
        assert!(!sock.exists(), "{name}: the control socket is removed");
        let dot: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(dot.is_empty(), "{name}: no temporary file left: {dot:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A namespace of this test's own, removed when dropped (also when the test fails).
struct Netns(String);
impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn check_config_with_a_bond_looks_at_the_live_link() {
    if !root_or_skip() {
        return;
    }
    let ns = Netns(format!("rlbd-cc-{}", std::process::id()));
    let ip = |args: &[&str]| {
        let ok = Command::new("ip")
            .args(args)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip {}", args.join(" "));
    };
    ip(&["netns", "add", &ns.0]);
    ip(&[
        "-n",
        &ns.0,
        "link",
        "add",
        "bondish",
        "type",
        "veth",
        "peer",
        "name",
        "bondish-p",
    ]);
    let check = |bond: &str| {
        let out = Command::new("ip")
            .args(["netns", "exec", &ns.0])
            .arg(exe())
            .args(["check-config", "--bond", bond])
            .output()
            .expect("rlbd in the namespace");
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        (out.status.code(), err)
    };
    // A link that is not a bond: what to change, 78.
    let (code, err) = check("bondish");
    say!("check-config --bond bondish: exit {code:?}: {err}");
    assert_eq!(code, Some(78), "{err}");
    assert!(
        err.contains("bondish is not a bond (its kind is veth)"),
        "{err}"
    );
    // No such link: 69, as `run` says.
    let (code, err) = check("rlbd-nobond");
    assert_eq!(code, Some(69), "{err}");
    assert!(err.contains("bond rlbd-nobond does not exist"), "{err}");
}
