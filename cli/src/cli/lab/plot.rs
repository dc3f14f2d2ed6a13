//! A small SVG chart writer for the experiment commands: stacked panels of bars and lines with
//! axes, ticks, labels and legends. SVG needs no fonts or system libraries at build time and
//! renders in any browser and on code hosting sites.

use std::fmt::Write as _;

/// Colours of successive series (readable on white, distinguishable for most colour vision).
pub const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

const WIDTH: f64 = 960.0;
const PANEL_HEIGHT: f64 = 300.0;
const TOP: f64 = 44.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 24.0;
/// Title and legend rows above each plot area.
const PANEL_TOP: f64 = 54.0;
const PANEL_BOTTOM: f64 = 52.0;

/// One axis: its range, ticks and label.
#[derive(Clone, Debug)]
pub struct Axis {
    label: String,
    min: f64,
    max: f64,
    ticks: Vec<(f64, String)>,
    log2: bool,
}

impl Axis {
    /// A linear axis covering `lo..=hi`, widened to round tick values.
    pub fn linear(label: &str, lo: f64, hi: f64) -> Axis {
        let (lo, hi) = match hi - lo {
            d if d > 0.0 && d.is_finite() => (lo, hi),
            _ => (lo - 0.5, lo + 0.5),
        };
        let step = nice_step((hi - lo) / 5.0);
        let (min, max) = ((lo / step).floor() * step, (hi / step).ceil() * step);
        let decimals = (-step.log10().floor()).max(0.0) as usize;
        let count = ((max - min) / step).round() as usize;
        let ticks = (0..=count)
            .map(|i| min + i as f64 * step)
            .map(|v| (v, format!("{v:.decimals$}")))
            .collect();
        Axis::with_ticks(label, min, max, ticks)
    }

    /// A linear axis from 0 to at least `hi`.
    pub fn from_zero(label: &str, hi: f64) -> Axis {
        Axis::linear(label, 0.0, hi.max(f64::MIN_POSITIVE))
    }

    /// A linear axis with the given range and ticks (for instance hexadecimal byte values).
    pub fn with_ticks(label: &str, min: f64, max: f64, ticks: Vec<(f64, String)>) -> Axis {
        Axis {
            label: label.into(),
            min,
            max,
            ticks,
            log2: false,
        }
    }

    /// A base-2 logarithmic axis with a labelled tick at each of `values` (positive).
    pub fn log2(label: &str, values: &[f64], name: impl Fn(f64) -> String) -> Axis {
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(0.0, f64::max);
        let (lo, hi) = if lo < hi {
            (lo, hi)
        } else {
            (lo / 2.0, lo * 2.0)
        };
        // Half a step of margin on both sides keeps end points off the frame.
        let margin = ((hi / lo).log2() * 0.04).max(0.25);
        Axis {
            label: label.into(),
            min: lo / margin.exp2(),
            max: hi * margin.exp2(),
            ticks: values.iter().map(|&v| (v, name(v))).collect(),
            log2: true,
        }
    }

    /// This axis's ticks that lie within `lo..=hi`.
    pub fn ticks_within(&self, lo: f64, hi: f64) -> Vec<(f64, String)> {
        let inside = |t: &&(f64, String)| (lo..=hi).contains(&t.0);
        self.ticks.iter().filter(inside).cloned().collect()
    }

    /// Where `v` lies, from 0 (start) to 1 (end).
    fn frac(&self, v: f64) -> f64 {
        let f = |x: f64| {
            if self.log2 {
                x.max(f64::MIN_POSITIVE).log2()
            } else {
                x
            }
        };
        (f(v) - f(self.min)) / (f(self.max) - f(self.min))
    }
}

/// A 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    mag * if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    }
}

/// Something drawn in a panel.
#[derive(Clone, Debug)]
pub enum Mark {
    /// Vertical bars centred on x, `width` in x units.
    Bars {
        /// Fill colour.
        color: &'static str,
        /// (x, height) of each bar.
        points: Vec<(f64, f64)>,
        /// Bar width in x units.
        width: f64,
    },
    /// A polyline with a marker at each point, named in the legend.
    Line {
        /// Legend text.
        name: String,
        /// Stroke colour.
        color: &'static str,
        /// Points in data units.
        points: Vec<(f64, f64)>,
        /// Dashed stroke.
        dashed: bool,
    },
    /// A horizontal reference line, named in the legend.
    Rule {
        /// Legend text.
        name: String,
        /// Stroke colour.
        color: &'static str,
        /// Height in y units.
        y: f64,
    },
}

/// One chart: a title, two axes and what is drawn.
#[derive(Clone, Debug)]
pub struct Panel {
    /// Shown above the plot area.
    pub title: String,
    /// Horizontal axis.
    pub x: Axis,
    /// Vertical axis.
    pub y: Axis,
    /// Drawn in order.
    pub marks: Vec<Mark>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Renders `panels` stacked under one `title` as a standalone SVG document.
pub fn svg(title: &str, panels: &[Panel]) -> String {
    let height = TOP + PANEL_HEIGHT * panels.len() as f64;
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = write!(
        s,
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="28" font-size="17" font-weight="bold" text-anchor="middle">{}</text>
"##,
        WIDTH / 2.0,
        esc(title)
    );
    for (i, p) in panels.iter().enumerate() {
        panel(&mut s, p, TOP + PANEL_HEIGHT * i as f64);
    }
    s.push_str("</svg>\n");
    s
}

/// Draws one panel whose band starts at `top`.
fn panel(s: &mut String, p: &Panel, top: f64) {
    let (x0, x1) = (LEFT, WIDTH - RIGHT);
    let (y0, y1) = (top + PANEL_TOP, top + PANEL_HEIGHT - PANEL_BOTTOM);
    let px = |v: f64| x0 + p.x.frac(v).clamp(0.0, 1.0) * (x1 - x0);
    let py = |v: f64| y1 - p.y.frac(v).clamp(0.0, 1.0) * (y1 - y0);
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" font-size="14" font-weight="bold" text-anchor="middle">{}</text>"#,
        (x0 + x1) / 2.0,
        top + 20.0,
        esc(&p.title)
    );
    for (v, label) in &p.y.ticks {
        let y = py(*v);
        let _ = writeln!(
            s,
            r##"<line x1="{x0}" x2="{x1}" y1="{y:.1}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" font-size="12" text-anchor="end">{}</text>"##,
            x0 - 6.0,
            y + 4.0,
            esc(label)
        );
    }
    for (v, label) in &p.x.ticks {
        let x = px(*v);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{y1}" y2="{:.1}" stroke="#444"/><text x="{x:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"##,
            y1 + 5.0,
            y1 + 19.0,
            esc(label)
        );
    }
    let mut legend = Vec::new();
    for m in &p.marks {
        match m {
            Mark::Bars {
                color,
                points,
                width,
            } => {
                let _ = write!(s, r#"<g fill="{color}">"#);
                for &(x, h) in points {
                    let (a, b) = (px(x - width / 2.0), px(x + width / 2.0));
                    let (top, base) = (py(h), py(p.y.min.max(0.0)));
                    let _ = write!(
                        s,
                        r#"<rect x="{a:.2}" y="{top:.2}" width="{:.2}" height="{:.2}"/>"#,
                        (b - a).max(0.5),
                        (base - top).max(0.0)
                    );
                }
                s.push_str("</g>\n");
            }
            Mark::Line {
                name,
                color,
                points,
                dashed,
            } => {
                let path: Vec<String> = points
                    .iter()
                    .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                    .collect();
                let dash = if *dashed {
                    r#" stroke-dasharray="6 4""#
                } else {
                    ""
                };
                let _ = write!(
                    s,
                    r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"{dash}/><g fill="{color}">"#,
                    path.join(" ")
                );
                for &(x, y) in points {
                    let _ = write!(
                        s,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="3.5"/>"#,
                        px(x),
                        py(y)
                    );
                }
                s.push_str("</g>\n");
                legend.push((name, *color, *dashed));
            }
            Mark::Rule { name, color, y } => {
                let y = py(*y);
                let _ = writeln!(
                    s,
                    r#"<line x1="{x0}" x2="{x1}" y1="{y:.1}" y2="{y:.1}" stroke="{color}" stroke-width="1.5" stroke-dasharray="6 4"/>"#
                );
                legend.push((name, *color, true));
            }
        }
    }
    let _ = writeln!(
        s,
        r##"<rect x="{x0}" y="{y0}" width="{:.1}" height="{:.1}" fill="none" stroke="#444"/>"##,
        x1 - x0,
        y1 - y0
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" font-size="13" text-anchor="middle">{}</text>"#,
        (x0 + x1) / 2.0,
        y1 + 40.0,
        esc(&p.x.label)
    );
    let (ly, lx) = ((y0 + y1) / 2.0, 20.0);
    let _ = writeln!(
        s,
        r#"<text x="{lx}" y="{ly:.1}" font-size="13" text-anchor="middle" transform="rotate(-90 {lx} {ly:.1})">{}</text>"#,
        esc(&p.y.label)
    );
    draw_legend(s, &legend, (x0 + x1) / 2.0, top + 40.0);
}

/// The legend: one centred row between the panel title and the plot area, so that it never
/// hides data.
fn draw_legend(s: &mut String, items: &[(&String, &str, bool)], centre: f64, y: f64) {
    let width = |name: &str| 40.0 + 7.0 * name.chars().count() as f64;
    let total: f64 = items.iter().map(|(n, ..)| width(n)).sum();
    let mut x = centre - total / 2.0;
    for (name, color, dashed) in items {
        let dash = if *dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = writeln!(
            s,
            r#"<line x1="{x:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="2.5"{dash}/><text x="{:.1}" y="{y:.1}" font-size="12">{}</text>"#,
            x + 24.0,
            y - 4.0,
            y - 4.0,
            x + 30.0,
            esc(name)
        );
        x += width(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_axes_get_round_ticks_covering_the_range() {
        let a = Axis::linear("x", 0.13, 0.87);
        let vals: Vec<f64> = a.ticks.iter().map(|t| t.0).collect();
        assert!(vals[0] <= 0.13 && *vals.last().unwrap() >= 0.87);
        assert_eq!(a.ticks[1].1, "0.2");
        let b = Axis::from_zero("y", 3700.0);
        assert_eq!(b.ticks.last().unwrap().1, "4000");
        assert!(Axis::linear("flat", 5.0, 5.0).ticks.len() >= 2);
    }

    #[test]
    fn svg_has_every_part_and_escapes_text() {
        let x = Axis::log2("block size", &[65536.0, 1048576.0], |v| format!("{v}"));
        let p = Panel {
            title: "size <&> speed".into(),
            x,
            y: Axis::from_zero("MB/s", 10.0),
            marks: vec![
                Mark::Line {
                    name: "fast".into(),
                    color: COLORS[0],
                    points: vec![(65536.0, 3.0), (1048576.0, 9.0)],
                    dashed: false,
                },
                Mark::Bars {
                    color: COLORS[1],
                    points: vec![(65536.0, 1.0)],
                    width: 1.0,
                },
                Mark::Rule {
                    name: "uniform".into(),
                    color: COLORS[2],
                    y: 5.0,
                },
            ],
        };
        let doc = svg("title", &[p.clone(), p]);
        assert!(doc.starts_with("<?xml") && doc.trim_end().ends_with("</svg>"));
        assert!(doc.contains("size &lt;&amp;&gt; speed") && !doc.contains("<&>"));
        assert_eq!(doc.matches("<polyline").count(), 2);
        assert!(doc.contains(">1048576<") && doc.contains(">uniform<") && doc.contains(">MB/s<"));
        // Tags are balanced: every opened group is closed.
        assert_eq!(doc.matches("<g ").count(), doc.matches("</g>").count());
    }
}
