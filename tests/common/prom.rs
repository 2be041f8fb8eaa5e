//! Prometheus' text format read by a real parser: the Python `prometheus_client` package's
//! (installed with pip when missing), for tests/observability.rs and tests/two_daemons.rs.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Reads Prometheus text from stdin with prometheus_client's parser and prints, as JSON, every
/// family: {name: {"type": T, "samples": [[sample name, {labels}, value], ...]}}.
pub const PROM_PARSE: &str = r#"
import json, math, sys
from prometheus_client.parser import text_string_to_metric_families
out = {}
for fam in text_string_to_metric_families(sys.stdin.read()):
    out[fam.name] = {
        "type": fam.type,
        "help": fam.documentation,
        "samples": [[s.name, s.labels, None if math.isnan(s.value) else s.value] for s in fam.samples],
    }
print(json.dumps(out))
"#;

pub fn python(script: &str, input: &str) -> Result<String, String> {
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .map_err(|e| format!("writing to python3: {e}"))?;
    let out = child
        .wait_with_output()
        .map_err(|e| format!("python3: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "python3 failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Makes sure `import prometheus_client` works, installing it with pip when it does not.
pub fn prometheus_client() {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let ready = READY.get_or_init(|| {
        let importable = || {
            Command::new("python3")
                .args(["-c", "import prometheus_client"])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if importable() {
            return Ok(());
        }
        say!("installing the Python package prometheus_client with pip");
        let pip = |extra: &[&str]| {
            Command::new("python3")
                .args(["-m", "pip", "install", "--quiet", "prometheus_client"])
                .args(extra)
                .status()
                .is_ok_and(|s| s.success())
        };
        // A Debian python3 refuses plain pip installs (PEP 668) unless told to.
        if (pip(&[]) || pip(&["--break-system-packages"])) && importable() {
            return Ok(());
        }
        Err(
            "python3 cannot import prometheus_client and pip could not install it \
             (python3 -m pip install prometheus_client)"
                .into(),
        )
    });
    if let Err(e) = ready {
        panic!("{e}");
    }
}

pub type Families = BTreeMap<String, serde_json::Value>;

/// The metric families in `text`, as prometheus_client's parser reads them.
pub fn parse_metrics(text: &str) -> Families {
    prometheus_client();
    let json = python(PROM_PARSE, text)
        .unwrap_or_else(|e| panic!("the exposition-format parser rejected the text: {e}\n{text}"));
    serde_json::from_str(&json).expect("parser output")
}

/// The value of the sample `name` whose labels include `labels`.
pub fn value(f: &Families, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    f.values()
        .flat_map(|fam| fam["samples"].as_array().cloned().unwrap_or_default())
        .find(|s| {
            s[0] == name
                && labels
                    .iter()
                    .all(|(k, v)| s[1].get(*k).and_then(|x| x.as_str()) == Some(*v))
        })
        .and_then(|s| s[2].as_f64())
}

pub fn family_type(f: &Families, family: &str) -> Option<String> {
    f.get(family)
        .and_then(|fam| fam["type"].as_str())
        .map(str::to_string)
}
