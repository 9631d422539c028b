//! SVG charts of the sweeps, written by hand: a few lines, axes with ticks, a legend. No plotting
//! library: the output is small, deterministic (byte-identical for the same figures, so the
//! committed charts diff cleanly) and needs no font or raster backend.

use std::fmt::Write;

use crate::seeds::Chart;

const W: f64 = 720.0;
const H: f64 = 440.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 55.0;
const COLORS: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"];

fn nice_step(span: f64) -> f64 {
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    mag * if f < 1.5 {
        1.0
    } else if f < 3.5 {
        2.0
    } else if f < 7.5 {
        5.0
    } else {
        10.0
    }
}

fn label(v: f64) -> String {
    if v >= 1024.0 && v.fract() == 0.0 && (v as u64).is_multiple_of(1024) && v >= 4096.0 {
        format!("{}K", v as u64 / 1024)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The chart as an SVG document.
pub fn svg(chart: &Chart) -> String {
    let points = chart.series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0f64);
    for p in points {
        x0 = x0.min(p.x);
        x1 = x1.max(p.x);
        y1 = y1.max(p.y);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if x0 == x1 {
        x1 = x0 + 1.0;
    }
    let y_step = nice_step(y1.max(1e-9) * 1.05);
    let y_top = (y1 * 1.05 / y_step).ceil() * y_step;
    let (lx0, lx1) = if chart.log_x { (x0.log2(), x1.log2()) } else { (x0, x1) };
    let px = |x: f64| {
        let v = if chart.log_x { x.log2() } else { x };
        LEFT + (v - lx0) / (lx1 - lx0) * (W - LEFT - RIGHT)
    };
    let py = |y: f64| TOP + (1.0 - y / y_top) * (H - TOP - BOTTOM);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
        (W - RIGHT + LEFT) / 2.0,
        escape(&chart.title)
    );
    // Axes and grid.
    let (bx, by) = (LEFT, H - BOTTOM);
    let _ = writeln!(s, r#"<line x1="{bx}" y1="{by}" x2="{}" y2="{by}" stroke="black"/>"#, W - RIGHT);
    let _ = writeln!(s, r#"<line x1="{bx}" y1="{TOP}" x2="{bx}" y2="{by}" stroke="black"/>"#);
    let mut y = 0.0;
    while y <= y_top + 1e-9 {
        let yy = py(y);
        let _ = writeln!(s, r##"<line x1="{bx}" y1="{yy:.1}" x2="{}" y2="{yy:.1}" stroke="#ddd"/>"##, W - RIGHT);
        let _ = writeln!(s, r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#, bx - 6.0, yy + 4.0, label(y));
        y += y_step;
    }
    let mut xs: Vec<f64> = chart.series.iter().flat_map(|s| s.points.iter().map(|p| p.x)).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    for x in xs {
        let xx = px(x);
        let _ = writeln!(s, r#"<line x1="{xx:.1}" y1="{by}" x2="{xx:.1}" y2="{}" stroke="black"/>"#, by + 5.0);
        let _ = writeln!(s, r#"<text x="{xx:.1}" y="{}" text-anchor="middle">{}</text>"#, by + 18.0, label(x));
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        (W - RIGHT + LEFT) / 2.0,
        H - 12.0,
        escape(chart.x_label)
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="{0}" text-anchor="middle" transform="rotate(-90 16 {0})">{1}</text>"#,
        (H - BOTTOM + TOP) / 2.0,
        escape(chart.y_label)
    );
    // Series and legend.
    let mut color = 0;
    for (i, series) in chart.series.iter().enumerate() {
        let ly = TOP + 10.0 + 18.0 * i as f64;
        let lx = W - RIGHT + 15.0;
        if series.published {
            for p in &series.points {
                let _ = writeln!(
                    s,
                    r#"<rect x="{:.1}" y="{:.1}" width="9" height="9" fill="black"/>"#,
                    px(p.x) - 4.5,
                    py(p.y) - 4.5
                );
            }
            let _ = writeln!(s, r#"<rect x="{:.1}" y="{:.1}" width="9" height="9" fill="black"/>"#, lx + 6.0, ly - 8.0);
        } else {
            let c = COLORS[color % COLORS.len()];
            color += 1;
            let pts: Vec<String> = series.points.iter().map(|p| format!("{:.1},{:.1}", px(p.x), py(p.y))).collect();
            let _ = writeln!(s, r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="2"/>"#, pts.join(" "));
            for p in &series.points {
                let _ = writeln!(s, r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"/>"#, px(p.x), py(p.y));
            }
            let _ = writeln!(
                s,
                r#"<line x1="{lx}" y1="{:.1}" x2="{}" y2="{:.1}" stroke="{c}" stroke-width="2"/>"#,
                ly - 4.0,
                lx + 20.0,
                ly - 4.0
            );
        }
        let _ = writeln!(s, r#"<text x="{}" y="{ly:.1}">{}</text>"#, lx + 26.0, escape(&series.label));
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seeds::{Point, Series};

    #[test]
    fn draws_every_series_and_point() {
        let chart = Chart {
            file: "t.svg".into(),
            title: "a <title>".into(),
            x_label: "x",
            y_label: "y",
            log_x: true,
            series: vec![
                Series {
                    label: "line".into(),
                    points: vec![Point { x: 1.0, y: 2.0 }, Point { x: 4.0, y: 3.0 }],
                    published: false,
                },
                Series { label: "seed".into(), points: vec![Point { x: 2.0, y: 1.0 }], published: true },
            ],
        };
        let s = svg(&chart);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert_eq!(s.matches("<polyline").count(), 1);
        assert_eq!(s.matches("<circle").count(), 2);
        assert!(s.contains("a &lt;title&gt;"));
        assert_eq!(svg(&chart), s, "deterministic");
    }
}
