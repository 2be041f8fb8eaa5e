//! `rlbd-lab chart`: the kernel lab's chart, drawn from its console log.
//!
//! tests/kernel-lab/guest-test.sh prints two kinds of lines on the guest console (anywhere in a
//! line, after any junk such as terminal escape codes or a kernel message fragment):
//!
//! ```text
//! KLAB-SAMPLE <t> <name>=<rx_bytes> [<name>=<rx_bytes> ...]
//! KLAB-MARK <t> <label ...>
//! ```
//!
//! `<t>` is the guest's uptime in seconds (the first field of /proc/uptime); `<rx_bytes>` is a
//! port's receive byte counter (/sys/class/net/NAME/statistics/rx_bytes) read at that moment; an
//! empty value (`sl1=`) means the port could not be read. Every other line is ignored, and so is
//! a sample line that does not parse in full or does not move forward in time. The counters
//! become Mbit/s per port over each interval between consecutive samples; times are relative to
//! the first sample.

use std::path::Path;

use super::chart::{svg, Mark};
use super::sample::{Sample, Series};

const SAMPLE_TAG: &str = "KLAB-SAMPLE ";
const MARK_TAG: &str = "KLAB-MARK ";

/// What a console log holds for the chart.
#[derive(Debug, Clone)]
pub struct LabChart {
    /// One sample per interval (so one fewer than the sample lines), times relative to the first
    /// sample line.
    pub series: Series,
    /// Marks, times relative to the first sample line.
    pub marks: Vec<Mark>,
    /// Sample lines used.
    pub lines: usize,
}

/// One parsed `KLAB-SAMPLE` line: uptime and, per port, its counter (None: not readable).
type Raw = (f64, Vec<(String, Option<u64>)>);

/// Parses a console log. Errors when it holds fewer than two usable sample lines.
pub fn parse(text: &str) -> Result<LabChart, String> {
    let mut raw: Vec<Raw> = Vec::new();
    let mut marks: Vec<Mark> = Vec::new();
    for line in text.lines() {
        let line = clean(line);
        if let Some(rest) = after(&line, SAMPLE_TAG) {
            if let Some(s) = parse_sample(rest) {
                let forward = match raw.last() {
                    Some((t, _)) => s.0 > *t,
                    None => true,
                };
                if forward {
                    raw.push(s);
                }
            }
        } else if let Some(rest) = after(&line, MARK_TAG) {
            let mut it = rest.trim().splitn(2, char::is_whitespace);
            let t = it.next().and_then(|t| t.parse::<f64>().ok());
            let label = it.next().map(str::trim).unwrap_or("");
            if let Some(t) = t.filter(|t| t.is_finite()) {
                if !label.is_empty() {
                    marks.push(Mark {
                        t,
                        label: label.to_string(),
                    });
                }
            }
        }
    }
    if raw.len() < 2 {
        return Err(format!(
            "{} usable {}lines (need at least 2)",
            raw.len(),
            SAMPLE_TAG
        ));
    }
    // Ports in the order they first appear.
    let mut ports: Vec<String> = Vec::new();
    for (_, fields) in &raw {
        for (name, _) in fields {
            if !ports.contains(name) {
                ports.push(name.clone());
            }
        }
    }
    let t0 = raw[0].0;
    let value = |fields: &[(String, Option<u64>)], port: &str| {
        fields.iter().find(|(n, _)| n == port).and_then(|(_, v)| *v)
    };
    let samples = raw
        .windows(2)
        .map(|w| {
            let ((ta, a), (tb, b)) = (&w[0], &w[1]);
            let dt = tb - ta;
            let mbit = ports
                .iter()
                .map(|p| match (value(a, p), value(b, p)) {
                    (Some(x), Some(y)) => y.saturating_sub(x) as f64 * 8.0 / dt / 1e6,
                    _ => 0.0,
                })
                .collect();
            Sample { t: tb - t0, mbit }
        })
        .collect();
    for m in &mut marks {
        m.t -= t0;
    }
    Ok(LabChart {
        series: Series { ports, samples },
        marks,
        lines: raw.len(),
    })
}

impl LabChart {
    /// Median interval between samples, seconds.
    pub fn period(&self) -> f64 {
        let s = &self.series.samples;
        let mut d: Vec<f64> = s.windows(2).map(|w| w[1].t - w[0].t).collect();
        if d.is_empty() {
            return s.first().map_or(0.0, |x| x.t);
        }
        d.sort_by(f64::total_cmp);
        d[d.len() / 2]
    }

    /// The SVG document; lines break where samples are more than 4 periods (at least 2 s) apart.
    pub fn svg(&self, title: &str, cap: f64) -> String {
        svg(
            title,
            &self.series,
            cap,
            &self.marks,
            (4.0 * self.period()).max(2.0),
        )
    }
}

/// `rlbd-lab chart`: reads `input`, writes the SVG to `output`; returns a one-line summary.
pub fn run(input: &Path, output: &Path, title: Option<&str>, cap: f64) -> Result<String, String> {
    let bytes = std::fs::read(input).map_err(|e| format!("{}: {e}", input.display()))?;
    let chart =
        parse(&String::from_utf8_lossy(&bytes)).map_err(|e| format!("{}: {e}", input.display()))?;
    let title = title.unwrap_or("kernel lab: receive rate per bond slave");
    std::fs::write(output, chart.svg(title, cap))
        .map_err(|e| format!("{}: {e}", output.display()))?;
    Ok(format!(
        "{} samples of {} every {:.2} s, {} marks -> {}",
        chart.lines,
        chart.series.ports.join(", "),
        chart.period(),
        chart.marks.len(),
        output.display()
    ))
}

/// The text after the first occurrence of `tag`.
fn after<'a>(line: &'a str, tag: &str) -> Option<&'a str> {
    line.find(tag).map(|i| &line[i + tag.len()..])
}

fn parse_sample(rest: &str) -> Option<Raw> {
    let mut fields = rest.split_whitespace();
    let t: f64 = fields.next()?.parse().ok()?;
    if !t.is_finite() {
        return None;
    }
    let mut ports = Vec::new();
    for f in fields {
        let (name, v) = f.split_once('=')?;
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b'=') {
            return None;
        }
        let v = if v.is_empty() {
            None
        } else {
            Some(v.parse::<u64>().ok()?)
        };
        ports.push((name.to_string(), v));
    }
    (!ports.is_empty()).then_some((t, ports))
}

/// The line without terminal escape sequences and control characters.
fn clean(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut it = line.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\x1b' {
            match it.next() {
                // CSI: parameters and intermediates up to a final byte in @..~
                Some('[') => {
                    for c in it.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // character set selection: one more character
                Some('(') | Some(')') => {
                    it.next();
                }
                _ => {}
            }
        } else if c == '\t' || !c.is_control() {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONSOLE: &str = "\
[    2.1] bonding: bond0: (slave sl0): Enslaving as an active interface
\x1b[?25lKLAB: init started at guest uptime 1.91s
KLAB-MARK 10.00 phase 1: c1+c3, no rlbd
KLAB-SAMPLE 10.00 sl0=1000000 sl1=500\r
=== PHASE 1 ===
KLAB-SAMPLE 10.50 sl0=2875000 sl1=500
KLAB-SAMPLE 10.40 sl0=9 sl1=9
KLAB-SAMPLE 10.80 sl0=garbage sl1=9
KLAB-SAMPL 11.0 sl0=1 sl1=1
\x1b[0mKLAB-SAMPLE 11.00 sl0=4750000 sl1=\x1b[K
PASS: phase 1 traffic flows -- total 30 Mbit/s
[   11.2] random kernel message KLAB-MARK 11.25 c3 moved to sl1 <fast>
KLAB-SAMPLE 11.50 sl0=6625000 sl1=1000500
KLAB-SAMPLE 12.00 sl0=8500000 sl1=2875500
KLAB-MARK oops no time
KLAB-RESULT: PASS
";

    #[test]
    fn parses_rates_and_marks_through_noise() {
        let c = parse(CONSOLE).unwrap();
        assert_eq!(c.lines, 5);
        assert_eq!(c.series.ports, vec!["sl0".to_string(), "sl1".to_string()]);
        let got: Vec<(f64, Vec<f64>)> = c
            .series
            .samples
            .iter()
            .map(|s| {
                (
                    (s.t * 100.0).round() / 100.0,
                    s.mbit.iter().map(|v| (v * 10.0).round() / 10.0).collect(),
                )
            })
            .collect();
        // 1,875,000 bytes in 0.5 s = 30 Mbit/s; sl1 unreadable at 11.00: no rate on both sides.
        assert_eq!(
            got,
            vec![
                (0.5, vec![30.0, 0.0]),
                (1.0, vec![30.0, 0.0]),
                (1.5, vec![30.0, 0.0]),
                (2.0, vec![30.0, 30.0]),
            ]
        );
        let marks: Vec<(f64, &str)> = c.marks.iter().map(|m| (m.t, m.label.as_str())).collect();
        assert_eq!(
            marks,
            vec![
                (0.0, "phase 1: c1+c3, no rlbd"),
                (1.25, "c3 moved to sl1 <fast>")
            ]
        );
        assert!((c.period() - 0.5).abs() < 1e-9);
    }

    #[test]
    fn too_few_samples_is_an_error() {
        assert!(parse("nothing here\nKLAB-SAMPLE 1.0 sl0=5\n").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn strips_escape_codes() {
        assert_eq!(clean("\x1b[1;32mKLAB\x1b(B-X\r\x07"), "KLAB-X");
    }

    #[test]
    fn svg_is_well_formed_and_names_both_ports() {
        let c = parse(CONSOLE).unwrap();
        let svg = c.svg("kernel lab & <test>", 30.0);
        assert!(svg.contains(">sl0</text>") && svg.contains(">sl1</text>"));
        assert!(svg.contains("c3 moved to sl1 &lt;fast&gt;"));
        assert_well_formed(&svg);
    }

    /// A small XML well-formedness check: tags nest and close, attributes are quoted, `&` starts
    /// an entity, one root element.
    fn assert_well_formed(doc: &str) {
        let mut stack: Vec<&str> = Vec::new();
        let mut roots = 0;
        let mut rest = doc.trim();
        while !rest.is_empty() {
            let Some(open) = rest.find('<') else {
                check_text(rest);
                break;
            };
            check_text(&rest[..open]);
            assert!(
                !stack.is_empty() || rest[..open].trim().is_empty(),
                "text outside the root"
            );
            let close = rest[open..].find('>').expect("unclosed tag") + open;
            let tag = &rest[open + 1..close];
            rest = &rest[close + 1..];
            assert!(!tag.contains('<'), "'<' inside a tag: {tag}");
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop(), Some(name.trim()), "mismatched </{name}>");
                continue;
            }
            let self_closing = tag.ends_with('/');
            let body = tag.trim_end_matches('/');
            let name = body.split_whitespace().next().expect("empty tag");
            let attrs = &body[name.len()..];
            assert_eq!(
                attrs.matches('"').count() % 2,
                0,
                "unbalanced quotes: {tag}"
            );
            if stack.is_empty() {
                roots += 1;
            }
            if !self_closing {
                stack.push(name);
            }
        }
        assert!(stack.is_empty(), "unclosed elements: {stack:?}");
        assert_eq!(roots, 1);
    }

    fn check_text(text: &str) {
        for (i, _) in text.match_indices('&') {
            let ent = &text[i..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                    .iter()
                    .any(|e| ent.starts_with(e)),
                "bare '&' in {text}"
            );
        }
    }
}
