//! A plain SVG line chart of per-port receive rate over time, with events marked.

use std::fmt::Write as _;

use super::sample::Series;

const W: f64 = 900.0;
const H: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

/// A vertical line with a label, at `t` seconds.
#[derive(Debug, Clone)]
pub struct Mark {
    pub t: f64,
    pub label: String,
}

/// Renders the series as an SVG document: one line per port (broken where samples are more
/// than `gap` seconds apart), a dashed line at `cap` Mbit/s, and the marks.
pub fn svg(title: &str, series: &Series, cap: f64, marks: &[Mark], gap: f64) -> String {
    let plot = Plot::new(series, cap);
    let mut out = String::new();
    plot.frame(&mut out, title);
    plot.axes(&mut out);
    plot.cap_line(&mut out, cap);
    plot.marks(&mut out, marks);
    for (i, port) in series.ports.iter().enumerate() {
        plot.port_line(&mut out, series, i, port, gap);
    }
    out.push_str("</svg>\n");
    out
}

/// The plot area and its scales: seconds across, Mbit/s up. Every element is written with the
/// same scales, so a time or a rate lands at the same place on the axes and on the lines.
struct Plot {
    t_min: f64,
    t_max: f64,
    y_max: f64,
    plot_w: f64,
    plot_h: f64,
}

impl Plot {
    fn new(series: &Series, cap: f64) -> Plot {
        let t_min = series.samples.first().map_or(0.0, |s| s.t);
        let t_max = series.samples.last().map_or(1.0, |s| s.t).max(t_min + 1.0);
        let peak = series
            .samples
            .iter()
            .flat_map(|s| s.mbit.iter().copied())
            .fold(0.0, f64::max);
        Plot {
            t_min,
            t_max,
            y_max: nice_ceiling(peak.max(cap * 1.2).max(1.0)),
            plot_w: W - LEFT - RIGHT,
            plot_h: H - TOP - BOTTOM,
        }
    }

    fn x(&self, t: f64) -> f64 {
        LEFT + (t - self.t_min) / (self.t_max - self.t_min) * self.plot_w
    }

    fn y(&self, v: f64) -> f64 {
        TOP + self.plot_h - v / self.y_max * self.plot_h
    }

    /// The plot's corners: left, bottom, right, top.
    fn corners(&self) -> (f64, f64, f64, f64) {
        (LEFT, TOP + self.plot_h, LEFT + self.plot_w, TOP)
    }

    /// The document's opening tag, background and title.
    fn frame(&self, out: &mut String, title: &str) {
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(out, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        let _ = writeln!(
            out,
            r#"<text x="{}" y="22" font-size="15" text-anchor="middle">{}</text>"#,
            LEFT + self.plot_w / 2.0,
            escape(title)
        );
    }

    /// Axes, grid, tick labels and axis titles.
    fn axes(&self, out: &mut String) {
        let (x0, y0, x1, y1) = self.corners();
        let _ = writeln!(
            out,
            r#"<g stroke="black" stroke-width="1"><line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}"/><line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}"/></g>"#
        );
        for i in 0..=5 {
            let v = self.y_max * f64::from(i) / 5.0;
            let yy = self.y(v);
            let _ = writeln!(
                out,
                r##"<line x1="{x0}" y1="{yy:.1}" x2="{x1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{v:.0}</text>"##,
                x0 - 6.0,
                yy + 4.0
            );
        }
        let step = tick_step(self.t_max - self.t_min);
        let mut t = (self.t_min / step).ceil() * step;
        while t <= self.t_max + 1e-9 {
            let xx = self.x(t);
            let _ = writeln!(
                out,
                r#"<line x1="{xx:.1}" y1="{y0}" x2="{xx:.1}" y2="{:.1}" stroke="black"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{t:.0}</text>"#,
                y0 + 5.0,
                y0 + 18.0
            );
            t += step;
        }
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">time (s)</text>"#,
            LEFT + self.plot_w / 2.0,
            H - 15.0
        );
        let _ = writeln!(
            out,
            r#"<text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle">receive rate (Mbit/s)</text>"#,
            TOP + self.plot_h / 2.0
        );
    }

    fn cap_line(&self, out: &mut String, cap: f64) {
        let (x0, _, x1, _) = self.corners();
        let yc = self.y(cap);
        let _ = writeln!(
            out,
            r##"<line x1="{x0}" y1="{yc:.1}" x2="{x1}" y2="{yc:.1}" stroke="#888" stroke-dasharray="6 4"/><text x="{:.1}" y="{:.1}" fill="#555">cap {cap:.0}</text>"##,
            x1 + 4.0,
            yc + 4.0
        );
    }

    /// The marks, each at its time (clamped into the plot), labels stacked down from the top.
    fn marks(&self, out: &mut String, marks: &[Mark]) {
        let (_, y0, _, y1) = self.corners();
        for (i, m) in marks.iter().enumerate() {
            let xm = self.x(m.t.clamp(self.t_min, self.t_max));
            let _ = writeln!(
                out,
                r##"<line x1="{xm:.1}" y1="{y0}" x2="{xm:.1}" y2="{y1}" stroke="#ff7f0e" stroke-width="1.5" stroke-dasharray="3 3"/><text x="{:.1}" y="{:.1}" fill="#c05000">{}</text>"##,
                xm + 3.0,
                y1 + 12.0 + 14.0 * i as f64,
                escape(&m.label)
            );
        }
    }

    /// Port `i`'s line, one polyline per run of samples no more than `gap` apart, and its
    /// legend entry.
    fn port_line(&self, out: &mut String, series: &Series, i: usize, port: &str, gap: f64) {
        let color = COLORS[i % COLORS.len()];
        let mut runs: Vec<Vec<(f64, f64)>> = Vec::new();
        let mut last_t = f64::NEG_INFINITY;
        for s in &series.samples {
            let v = s.mbit.get(i).copied().unwrap_or(0.0);
            if s.t - last_t > gap || runs.is_empty() {
                runs.push(Vec::new());
            }
            if let Some(run) = runs.last_mut() {
                run.push((self.x(s.t), self.y(v)));
            }
            last_t = s.t;
        }
        for run in runs {
            let pts: Vec<String> = run.iter().map(|(a, b)| format!("{a:.1},{b:.1}")).collect();
            let _ = writeln!(
                out,
                r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
                pts.join(" ")
            );
        }
        let ly = TOP + 10.0 + 20.0 * i as f64;
        let lx = W - RIGHT + 40.0;
        let _ = writeln!(
            out,
            r#"<line x1="{lx}" y1="{ly}" x2="{:.1}" y2="{ly}" stroke="{color}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 24.0,
            lx + 30.0,
            ly + 4.0,
            escape(port)
        );
    }
}

fn nice_ceiling(v: f64) -> f64 {
    let mag = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|c| *c >= v)
        .unwrap_or(10.0 * mag)
}

fn tick_step(span: f64) -> f64 {
    [1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0]
        .into_iter()
        .find(|s| span / s <= 12.0)
        .unwrap_or(120.0)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::sample::Sample;

    #[test]
    fn renders_lines_legend_and_marks() {
        let series = Series {
            ports: vec!["p0".into(), "p1".into()],
            samples: (0..8)
                .map(|i| Sample {
                    t: f64::from(i) + if i >= 4 { 5.0 } else { 0.0 },
                    mbit: vec![90.0, 0.0],
                })
                .collect(),
        };
        let marks = [Mark {
            t: 10.0,
            label: "rlbd moved c1 -> p1".into(),
        }];
        let s = svg("demo <test>", &series, 100.0, &marks, 1.5);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        // Two phases separated by a gap: two polylines per port.
        assert_eq!(s.matches("<polyline").count(), 4);
        assert!(s.contains(">p0</text>") && s.contains(">p1</text>"));
        assert!(s.contains("rlbd moved c1 -&gt; p1"));
        assert!(s.contains("demo &lt;test&gt;"));
        assert_eq!(nice_ceiling(120.0), 200.0);
        assert_eq!(nice_ceiling(96.0), 100.0);
    }
}
