//! The memory timeline as an SVG (`timeline-NAME.svg` in the output
//! folder), drawn with plotters' SVG backend: live bytes over the sampled
//! training step and inference call, one panel each on a shared scale, the
//! phases shaded and labelled, the peak marked and annotated with the
//! blocks open there. Also the timeline cut down to a few points, for the
//! comment's Mermaid chart. Pure: timeline in, text out.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use gate_probe::timeline::{Event, Sample, Timeline};
use gate_spec::units::{Bytes, GIB, KIB, MIB};

const WIDTH: u32 = 1000;
const HEIGHT: u32 = 480;
const FONT: &str = "sans-serif";
/// GitHub's palette: strong on white.
const LIVE: RGBColor = RGBColor(0x09, 0x69, 0xda);
const PEAK: RGBColor = RGBColor(0xcf, 0x22, 0x2e);
const TEXT: RGBColor = RGBColor(0x1f, 0x23, 0x28);
const MUTED: RGBColor = RGBColor(0x59, 0x63, 0x6e);

/// The file the timeline of `component` is written to: `timeline-NAME.svg`,
/// with any character other than letters, digits, `_`, `-` and `.` made `_`
/// (and then a hash of the real name, so two names never share a file).
pub fn file_name(component: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-.".contains(c);
    let cut: String = component.chars().take(80).collect();
    if cut.len() == component.len() && !component.is_empty() && component.chars().all(safe) {
        return format!("timeline-{component}.svg");
    }
    let clean: String = cut.chars().map(|c| if safe(c) { c } else { '_' }).collect();
    format!("timeline-{clean}-{:08x}.svg", gate_spec::hash::fnv1a(component) as u32)
}

/// A phase's colour.
fn phase_color(phase: &str) -> RGBColor {
    match phase {
        "forward" => RGBColor(0x09, 0x69, 0xda),
        "backward" => RGBColor(0xbc, 0x4c, 0x00),
        "optimizer" => RGBColor(0x82, 0x50, 0xdf),
        "inference" => RGBColor(0x1a, 0x7f, 0x37),
        _ => RGBColor(0x6e, 0x77, 0x81),
    }
}

/// The unit the figures are drawn in, by the largest: KiB, MiB or GiB.
pub fn unit_for(max_bytes: u64) -> (&'static str, f64) {
    if max_bytes >= 4 * GIB {
        ("GiB", GIB as f64)
    } else if max_bytes >= MIB {
        ("MiB", MIB as f64)
    } else {
        ("KiB", KIB as f64)
    }
}

/// One sampled span: the samples from a phase mark to the span's end.
struct Panel<'a> {
    /// Index of its first sample in the timeline.
    first: usize,
    samples: &'a [Sample],
}

impl Panel<'_> {
    fn title(&self) -> &'static str {
        match self.samples.first().map(|s| &s.event) {
            Some(Event::Phase(p)) if p == "inference" => "one inference call",
            _ => "one training step",
        }
    }
}

fn panels(t: &Timeline) -> Vec<Panel<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, s) in t.samples.iter().enumerate() {
        if s.event == Event::End {
            out.push(Panel {
                first: start,
                samples: &t.samples[start..=i],
            });
            start = i + 1;
        }
    }
    if start < t.samples.len() {
        out.push(Panel {
            first: start,
            samples: &t.samples[start..],
        });
    }
    out
}

/// What the peak annotation says: `peak 5.597 MiB in backward` and the blocks.
pub fn peak_text(t: &Timeline) -> Option<(String, String)> {
    let p = t.peak.as_ref()?;
    let phase = p.phase.as_deref().map(|ph| format!(" in {ph}")).unwrap_or_default();
    let blocks = match &p.blocks {
        None => "open blocks: not recorded (sample bound reached)".to_string(),
        Some(b) if b.is_empty() => "no block open".to_string(),
        Some(b) => format!("open: {}", b.join(" › ")),
    };
    Some((format!("peak {}{phase}", Bytes(p.bytes)), blocks))
}

/// The timeline of component `name` as an SVG document.
pub fn svg(name: &str, t: &Timeline) -> Result<String, String> {
    let mut buf = String::new();
    draw(&mut buf, name, t).map_err(|e| format!("cannot draw the timeline of `{name}`: {e}"))?;
    Ok(buf)
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn draw(buf: &mut String, name: &str, t: &Timeline) -> DrawResult {
    let root = SVGBackend::with_string(buf, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let (head, body) = root.split_vertically(70);
    head.draw(&Text::new(
        format!("{name}: live memory over one training step and one inference call"),
        (16, 10),
        (FONT, 19).into_font().style(FontStyle::Bold).color(&TEXT),
    ))?;
    let source = match t.source.as_str() {
        "cuda" => "the CUDA pool's used bytes",
        "cpu" => "the counting allocator",
        other => other,
    };
    let sub = format!(
        "Bytes above the baseline ({} live after warm-up), read from {source} at every scope boundary and phase mark ({} samples).",
        Bytes(t.base_bytes),
        t.samples.len(),
    );
    head.draw(&Text::new(sub, (16, 36), (FONT, 13).into_font().color(&MUTED)))?;
    if t.dropped > 0 {
        head.draw(&Text::new(
            format!(
                "{} boundaries past the sample bound not stored (their bytes still count)",
                t.dropped
            ),
            (16, 54),
            (FONT, 12).into_font().color(&PEAK),
        ))?;
    }
    legend(&head)?;

    let top = t.samples.iter().map(|s| s.peak.max(s.live)).max().unwrap_or(0).max(1);
    let (unit, scale) = unit_for(top);
    // Room above the highest point for the phase labels.
    let y_top = top as f64 / scale * 1.35;
    let panels = panels(t);
    let areas: Vec<DrawingArea<SVGBackend, Shift>> = match panels.len() {
        0 => Vec::new(),
        1 => vec![body],
        n => {
            // The training step is the wider panel; any further spans share the rest.
            let first = (WIDTH as f64 * 0.62) as u32;
            let (a, rest) = body.split_horizontally(first);
            let mut v = vec![a];
            let each = (WIDTH - first) / (n as u32 - 1);
            let mut rest = rest;
            for _ in 1..n - 1 {
                let (x, r) = rest.split_horizontally(each);
                v.push(x);
                rest = r;
            }
            v.push(rest);
            v
        }
    };
    for (panel, area) in panels.iter().zip(&areas) {
        draw_panel(area, t, panel, unit, scale, y_top)?;
    }
    root.present()?;
    Ok(())
}

/// The two series' keys, top right of the header.
fn legend(head: &DrawingArea<SVGBackend, Shift>) -> DrawResult {
    let x = WIDTH as i32 - 440;
    let font = (FONT, 12).into_font().color(&TEXT);
    head.draw(&PathElement::new(vec![(x, 60), (x + 24, 60)], LIVE.stroke_width(2)))?;
    head.draw(&Text::new("live at each boundary", (x + 30, 54), font.clone()))?;
    head.draw(&PathElement::new(
        vec![(x + 160, 60), (x + 184, 60)],
        PEAK.stroke_width(1),
    ))?;
    head.draw(&Text::new("highest since the previous boundary", (x + 190, 54), font))?;
    Ok(())
}

fn decimals_for(max: f64) -> usize {
    if max < 1.0 {
        2
    } else if max < 10.0 {
        1
    } else {
        0
    }
}

/// A panel's chart: milliseconds across, the figure's unit up.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A sample's time in milliseconds.
fn ms(s: &Sample) -> f64 {
    s.t_us as f64 / 1000.0
}

fn draw_panel(
    area: &DrawingArea<SVGBackend, Shift>,
    t: &Timeline,
    panel: &Panel,
    unit: &str,
    scale: f64,
    y_top: f64,
) -> DrawResult {
    let x_max = panel.samples.last().map_or(0.0, ms).max(0.001);
    let x_dec = decimals_for(x_max);
    let y_dec = decimals_for(y_top);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .margin_top(4)
        .caption(panel.title(), (FONT, 15).into_font().color(&TEXT))
        .x_label_area_size(42)
        .y_label_area_size(58)
        .build_cartesian_2d(0f64..x_max * 1.02, 0f64..y_top)?;
    let x_desc = format!("ms into {}", panel.title().trim_start_matches("one "));
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(6)
        .y_labels(6)
        .x_label_formatter(&|v| format!("{v:.x_dec$}"))
        .y_label_formatter(&|v| format!("{v:.y_dec$}"))
        .x_desc(x_desc)
        .y_desc(format!("{unit} above baseline"))
        .label_style((FONT, 12).into_font().color(&TEXT))
        .axis_desc_style((FONT, 13).into_font().color(&TEXT))
        .max_light_lines(0)
        .bold_line_style(RGBColor(0xd0, 0xd7, 0xde))
        .draw()?;
    draw_phases(&mut chart, t, panel, x_max, y_top)?;
    draw_bytes(&mut chart, panel, scale)?;
    draw_peak(&mut chart, t, panel, x_max, scale)
}

/// Phase regions, shaded, with their names in rows so narrow ones do not collide.
fn draw_phases(chart: &mut Chart, t: &Timeline, panel: &Panel, x_max: f64, y_top: f64) -> DrawResult {
    let regions: Vec<(String, usize, usize)> = t
        .phases()
        .into_iter()
        .filter(|(_, a, _)| *a >= panel.first && *a < panel.first + panel.samples.len())
        .map(|(p, a, b)| (p, a - panel.first, b - panel.first))
        .collect();
    let px_width = chart.plotting_area().dim_in_pixel().0.max(1) as f64;
    let mut row_ends = [f64::MIN; 3];
    for (phase, a, b) in &regions {
        let (xa, xb) = (ms(&panel.samples[*a]), ms(&panel.samples[*b]));
        let color = phase_color(phase);
        chart.draw_series(std::iter::once(Rectangle::new(
            [(xa, 0.0), (xb, y_top)],
            color.mix(0.10).filled(),
        )))?;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(xa, 0.0), (xa, y_top)],
            color.mix(0.6).stroke_width(1),
        )))?;
        // The naive font's width: about 0.6 em a character.
        let x_end = x_max * 1.02;
        let label_w = (phase.len() as f64 * 7.0 + 8.0) / px_width * x_end;
        // A label that would run past the plot ends at its right edge instead.
        let (at, anchor, dx, h) = if xa + label_w > x_end {
            (x_end - label_w, x_end, -4, HPos::Right)
        } else {
            (xa, xa, 4, HPos::Left)
        };
        let row = row_ends.iter().position(|&end| end <= at).unwrap_or(2);
        row_ends[row] = at + label_w;
        chart.draw_series(std::iter::once(
            EmptyElement::at((anchor, y_top))
                + Text::new(
                    phase.clone(),
                    (dx, 4 + 16 * row as i32),
                    (FONT, 13)
                        .into_font()
                        .style(FontStyle::Bold)
                        .color(&color)
                        .pos(Pos::new(h, VPos::Top)),
                ),
        ))?;
    }
    Ok(())
}

/// The two series: the highest live bytes since the previous sample, as
/// steps, and the live bytes at each boundary.
fn draw_bytes(chart: &mut Chart, panel: &Panel, scale: f64) -> DrawResult {
    let y = |b: u64| b as f64 / scale;
    let mut steps: Vec<(f64, f64)> = Vec::with_capacity(panel.samples.len() * 2);
    let mut prev = 0.0;
    for s in panel.samples {
        steps.push((prev, y(s.peak)));
        steps.push((ms(s), y(s.peak)));
        prev = ms(s);
    }
    chart.draw_series(LineSeries::new(steps, PEAK.mix(0.8).stroke_width(1)))?;
    chart.draw_series(LineSeries::new(
        panel.samples.iter().map(|s| (ms(s), y(s.live))),
        LIVE.stroke_width(2),
    ))?;
    if panel.samples.len() <= 200 {
        chart.draw_series(
            panel
                .samples
                .iter()
                .map(|s| Circle::new((ms(s), y(s.live)), 2, LIVE.filled())),
        )?;
    }
    Ok(())
}

/// The peak, when it is in this panel: its interval in bold, a dot, and what was open there.
fn draw_peak(chart: &mut Chart, t: &Timeline, panel: &Panel, x_max: f64, scale: f64) -> DrawResult {
    let (Some(p), Some((line1, line2))) = (&t.peak, peak_text(t)) else {
        return Ok(());
    };
    if p.sample < panel.first || p.sample >= panel.first + panel.samples.len() {
        return Ok(());
    }
    let px_width = chart.plotting_area().dim_in_pixel().0.max(1) as f64;
    let i = p.sample - panel.first;
    let x1 = ms(&panel.samples[i]);
    let x0 = if i == 0 { 0.0 } else { ms(&panel.samples[i - 1]) };
    let py = p.bytes as f64 / scale;
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(x0, py), (x1, py)],
        PEAK.stroke_width(3),
    )))?;
    let xm = (x0 + x1) / 2.0;
    chart.draw_series(std::iter::once(Circle::new((xm, py), 5, PEAK.filled())))?;
    // To the right of the dot when the longer line fits there (about 8 px a character).
    let text_px = line1.chars().count().max(line2.chars().count()) as f64 * 8.0 + 12.0;
    let right = xm / (x_max * 1.02) * px_width + text_px < px_width;
    let (dx, h) = if right { (10, HPos::Left) } else { (-10, HPos::Right) };
    let font = |size, style| {
        (FONT, size)
            .into_font()
            .style(style)
            .color(&PEAK)
            .pos(Pos::new(h, VPos::Top))
    };
    chart.draw_series(std::iter::once(
        EmptyElement::at((xm, py))
            + Text::new(line1.clone(), (dx, 6), font(14, FontStyle::Bold))
            + Text::new(line2.clone(), (dx, 24), font(12, FontStyle::Normal)),
    ))?;
    Ok(())
}

/// One point of the compact timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The phase's initial and the point's number, unique: `f1`, `b7`, `i12`.
    pub label: String,
    /// The highest live bytes over the samples the point stands for.
    pub bytes: u64,
}

/// The timeline in at most `max` points, in order: each point stands for
/// a run of consecutive samples of one phase and keeps their highest
/// `peak`, so the timeline's peak is always one of the points. Every phase
/// gets a point (when there are no more phases than points); the rest go
/// to the phases with the most samples.
pub fn compact(t: &Timeline, max: usize) -> Vec<Point> {
    let n = t.samples.len();
    let max = max.max(1);
    // Each sample's phase in one pass: asking `phase_of` for each sample
    // replayed the samples before it, quadratic in an artifact's samples
    // (#28 item 13).
    let phases = phase_by_sample(t);
    // Runs of consecutive samples measured in the same phase.
    let mut runs: Vec<(Option<&str>, usize, usize)> = Vec::new();
    for (i, &p) in phases.iter().enumerate() {
        match runs.last_mut() {
            Some((q, _, end)) if *q == p => *end = i + 1,
            _ => runs.push((p, i, i + 1)),
        }
    }
    if runs.len() > max {
        runs = vec![(None, 0, n)];
    }
    // One point per run, then each spare point to the run with the most
    // samples a point (ties to the earlier run), never more points than samples.
    let mut counts: Vec<usize> = vec![1; runs.len()];
    for _ in runs.len()..max {
        let best = (0..runs.len())
            .filter(|&k| counts[k] < runs[k].2 - runs[k].1)
            .max_by(|&x, &y| {
                let (lx, ly) = (runs[x].2 - runs[x].1, runs[y].2 - runs[y].1);
                (lx * counts[y]).cmp(&(ly * counts[x])).then(y.cmp(&x))
            });
        match best {
            Some(k) => counts[k] += 1,
            None => break,
        }
    }
    let mut out = Vec::with_capacity(max);
    for ((_, a, b), k) in runs.iter().zip(counts) {
        let len = b - a;
        for j in 0..k {
            let (x, y) = (a + j * len / k, a + (j + 1) * len / k);
            let Some(i) = (x..y).max_by(|&p, &q| t.samples[p].peak.cmp(&t.samples[q].peak).then(q.cmp(&p))) else {
                continue;
            };
            let initial = phases[i].and_then(|p| p.chars().next()).unwrap_or('x');
            out.push(Point {
                label: format!("{initial}{}", out.len() + 1),
                bytes: t.samples[i].peak,
            });
        }
    }
    out
}

/// [`phase_of`] of every sample, in one pass over the samples.
fn phase_by_sample(t: &Timeline) -> Vec<Option<&str>> {
    let mut before: Option<&str> = None;
    t.samples
        .iter()
        .map(|s| {
            let here = match &s.event {
                Event::Phase(p) => before.or(Some(p.as_str())),
                _ => before,
            };
            // What `Timeline::state_before` tracks of the phase: a mark
            // opens its phase, a span's end closes it.
            match &s.event {
                Event::Phase(p) => before = Some(p),
                Event::End => before = None,
                Event::Enter(_) | Event::Exit(_) => {}
            }
            here
        })
        .collect()
}

/// The phase the bytes of sample `i` were measured in (the interval before
/// it; a span's first mark stands for its own phase).
pub fn phase_of(t: &Timeline, i: usize) -> Option<String> {
    Timeline::state_before(&t.samples, i)
        .0
        .or_else(|| match &t.samples[i].event {
            Event::Phase(p) => Some(p.clone()),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_safe_and_distinct() {
        assert_eq!(file_name("mlp"), "timeline-mlp.svg");
        assert_eq!(file_name("tft_v2.big-1"), "timeline-tft_v2.big-1.svg");
        let a = file_name("tft@batch16");
        assert!(a.starts_with("timeline-tft_batch16-") && a.ends_with(".svg"), "{a}");
        assert_ne!(a, file_name("tft_batch16"));
        assert_ne!(a, file_name("tft#batch16"));
        let evil = file_name("../../etc/x y");
        assert!(!evil.contains('/') && !evil.contains(' '), "{evil}");
    }
}
