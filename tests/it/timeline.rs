//! The memory timeline (issue #16 item 2): live bytes over one training step
//! and one inference call, sampled at every scope boundary and phase mark.
//! A synthetic timeline gives exact figures for the peak, the blocks open
//! there, the compact form and the SVG; through the binary, the MLP's
//! timeline is written as timeline-mlp.svg and its peaks are the
//! component's `training_peak` and `inference_peak` to the byte; a model
//! with more scope boundaries than the bound keeps the bound and the exact peak.

use crate::common;

use std::path::Path;

use gate_contract::report::Report;
use gate_probe::timeline::{Event, Timeline, MAX_SAMPLES};
use gate_render::timeline::{compact, file_name, svg};

const MIB: u64 = 1024 * 1024;

/// A training step (forward with `enc` and `enc.grn`, backward, optimizer)
/// and an inference call; the peak, 1.5 MiB, is inside `enc.grn`.
fn synthetic() -> Timeline {
    serde_json::from_value(serde_json::json!({
        "source": "cpu",
        "base_bytes": 4096,
        "samples": [
            "5 0 0 phase:forward",
            "9 0 0 enter:enc",
            "300 262144 262144 enter:enc.grn",
            "900 524288 1572864 exit:enc.grn",
            "1000 786432 786432 exit:enc",
            "1100 786432 786432 phase:backward",
            "5000 393216 1310720 phase:optimizer",
            "6000 131072 655360 end",
            "3 65536 65536 phase:inference",
            "400 65536 327680 end"
        ],
        "peak": null
    }))
    .unwrap()
}

#[test]
fn the_peak_is_the_highest_sample_and_names_the_blocks_open_before_it() {
    let t = synthetic();
    // `peak` is derived when sampling; here the same rule is applied to the samples.
    let (phase, blocks) = Timeline::state_before(&t.samples, 3);
    assert_eq!(phase.as_deref(), Some("forward"));
    assert_eq!(blocks, ["enc", "enc.grn"]);
    assert_eq!(Timeline::state_before(&t.samples, 6), (Some("backward".into()), vec![]));
    assert_eq!(
        Timeline::state_before(&t.samples, 9),
        (Some("inference".into()), vec![])
    );
    assert_eq!(
        t.phases(),
        [
            ("forward".to_string(), 0, 5),
            ("backward".to_string(), 5, 6),
            ("optimizer".to_string(), 6, 7),
            ("inference".to_string(), 8, 9)
        ]
    );
    assert_eq!(t.samples[7].event, Event::End);
}

#[test]
fn compact_keeps_every_phase_and_the_peak_in_at_most_the_points_asked_for() {
    let t = synthetic();
    let all: Vec<(String, u64)> = compact(&t, 40).into_iter().map(|p| (p.label, p.bytes)).collect();
    let s = |l: &str, b: u64| (l.to_string(), b);
    // Fewer samples than points: one point a sample, labelled by the phase its bytes were measured in.
    assert_eq!(
        all,
        [
            s("f1", 0),
            s("f2", 0),
            s("f3", 262144),
            s("f4", 1572864),
            s("f5", 786432),
            s("f6", 786432),
            s("b7", 1310720),
            s("o8", 655360),
            s("i9", 65536),
            s("i10", 327680),
        ]
    );
    // Five points: one for each of the four phases, the spare one to the
    // forward pass (the most samples); its points keep their runs' highest.
    let five: Vec<(String, u64)> = compact(&t, 5).into_iter().map(|p| (p.label, p.bytes)).collect();
    assert_eq!(
        five,
        [
            s("f1", 262144),
            s("f2", 1572864),
            s("b3", 1310720),
            s("o4", 655360),
            s("i5", 327680)
        ]
    );

    // A long timeline: 40 points at most, the peak among them, every phase there.
    let mut long = synthetic();
    let extra: Vec<_> = (0..500u64)
        .map(|i| {
            let peak = i * 1000 + if i == 321 { 9 * MIB } else { 0 };
            serde_json::from_value(serde_json::json!(format!("{} {} {peak} enter:x", 1000 + i, i * 1000))).unwrap()
        })
        .collect();
    long.samples.splice(5..5, extra);
    let points = compact(&long, 40);
    assert_eq!(points.len(), 40);
    assert_eq!(points.iter().map(|p| p.bytes).max(), Some(321_000 + 9 * MIB));
    for phase in ['f', 'b', 'o', 'i'] {
        assert!(points.iter().any(|p| p.label.starts_with(phase)), "{phase}");
    }
}

/// Every `<text>` of an SVG document, in order.
fn svg_texts(doc: &str) -> Vec<String> {
    let xml = roxmltree::Document::parse(doc).unwrap_or_else(|e| panic!("the SVG is not XML: {e}\n{doc}"));
    assert_eq!(xml.root_element().tag_name().name(), "svg");
    xml.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect()
}

#[test]
fn the_svg_is_xml_with_the_phases_marked_and_the_peak_annotated() {
    let mut t = synthetic();
    t.peak = serde_json::from_value(serde_json::json!({
        "bytes": 1572864, "sample": 3, "phase": "forward", "blocks": ["enc", "enc.grn"]
    }))
    .unwrap();
    let doc = svg("tft", &t).unwrap();
    let texts = svg_texts(&doc);
    for want in [
        "tft: live memory over one training step and one inference call",
        "one training step",
        "one inference call",
        "forward",
        "backward",
        "optimizer",
        "inference",
        "peak 1.500 MiB in forward",
        "open: enc › enc.grn",
        "MiB above baseline",
        "ms into training step",
        "live at each boundary",
        "highest since the previous boundary",
    ] {
        assert!(texts.iter().any(|t| t == want), "no text `{want}` in {texts:?}");
    }
    // The annotation is drawn once, in the training panel only.
    assert_eq!(texts.iter().filter(|t| t.starts_with("peak ")).count(), 1);
}

#[test]
fn file_names_are_the_component_or_a_sanitized_name_with_its_hash() {
    assert_eq!(file_name("mlp"), "timeline-mlp.svg");
    let odd = file_name("tft@batch 16/x");
    assert!(
        odd.starts_with("timeline-tft_batch_16_x-") && odd.ends_with(".svg"),
        "{odd}"
    );
}

/// The comment of a failing component with a timeline: the compact chart
/// and the sentence naming the SVG (tests/fixtures/report-timeline.json, a
/// small TFT measured on the CPU whose budgets fail).
#[test]
fn the_comment_shows_a_failing_components_timeline_compactly() {
    let report: Report = serde_json::from_str(include_str!("../fixtures/report-timeline.json")).unwrap();
    let md = gate_render::markdown::render(&report, None, 65_536);
    let start = md
        .find("```mermaid\n---\nconfig:\n  xyChart:")
        .expect("a timeline chart");
    let tail = " in this run's artifact.\n";
    let end = start + md[start..].find(tail).expect("the sentence") + tail.len();
    insta::assert_snapshot!(&md[start..end]);
    // Only the failing component has one.
    assert_eq!(md.matches("in this run's artifact").count(), 1);
    assert!(!md.contains("timeline-mlp.svg"));
}

fn check(spec: &Path, out: &Path) -> serde_json::Value {
    let o = common::gate()
        .args(["check", "--baseline", "none", "--budgets"])
        .arg(spec)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}

fn timeline(r: &serde_json::Value, c: &str) -> Timeline {
    serde_json::from_value(r["components"][c]["timeline"].clone()).unwrap()
}

fn metric(r: &serde_json::Value, c: &str, m: &str) -> u64 {
    r["components"][c]["metrics"][m]["value"].as_u64().unwrap()
}

/// The highest `peak` of the training step's samples and of the inference call's.
fn span_peaks(t: &Timeline) -> (u64, u64) {
    let end = t.samples.iter().position(|s| s.event == Event::End).unwrap();
    let max = |s: &[gate_probe::timeline::Sample]| s.iter().map(|s| s.peak).max().unwrap();
    (max(&t.samples[..=end]), max(&t.samples[end + 1..]))
}

/// Exactness: each sample carries the highest live bytes since the one
/// before (the probe's peak is reset at every boundary while sampling), and
/// the first and last samples bracket the span, so the highest sample is
/// the span's peak to the byte, not just the highest boundary. `training_peak`
/// is the larger of the first step's and the steady step's; the steady step
/// (the sampled one) holds the optimizer state from the start, so it is the
/// larger, and the two are equal.
#[test]
fn the_mlp_timeline_is_written_and_its_peaks_are_the_components_to_the_byte() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // An earlier run's timeline of a component this spec has not goes with
    // the old set; other files stay.
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("timeline-gone.svg"), "<svg/>").unwrap();
    std::fs::write(out.join("notes.svg"), "<svg/>").unwrap();
    let spec = Path::new(env!("GATE_REPO_ROOT")).join("examples/mlp.yaml");
    let r = check(&spec, &out);
    assert!(!out.join("timeline-gone.svg").exists());
    assert!(out.join("notes.svg").exists());
    let t = timeline(&r, "mlp");
    let events: Vec<String> = t.samples.iter().map(|s| s.event.tag()).collect();
    assert_eq!(
        events,
        [
            "phase:forward",
            "enter:mlp",
            "exit:mlp",
            "phase:backward",
            "phase:optimizer",
            "end",
            "phase:inference",
            "end"
        ]
    );
    assert_eq!(t.source, "cpu");
    assert_eq!(t.dropped, 0);
    let (training, inference) = span_peaks(&t);
    assert_eq!(training, metric(&r, "mlp", "training_peak"));
    assert_eq!(inference, metric(&r, "mlp", "inference_peak"));
    let peak = t.peak.as_ref().unwrap();
    assert_eq!(peak.bytes, training);
    assert_eq!(peak.phase.as_deref(), Some("optimizer"));
    assert_eq!(
        peak.blocks,
        Some(vec![]),
        "the optimizer step runs outside the model's blocks"
    );
    for s in &t.samples {
        assert!(s.peak >= s.live, "{s:?}");
    }

    let doc = std::fs::read_to_string(out.join("timeline-mlp.svg")).unwrap();
    let texts = svg_texts(&doc);
    for want in ["forward", "backward", "optimizer", "inference"] {
        assert!(texts.iter().any(|t| t == want), "no `{want}` in {texts:?}");
    }
    let mib = training as f64 / MIB as f64;
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("peak ") && t.ends_with(" in optimizer")),
        "{mib} {texts:?}"
    );
}

/// A model with more scope boundaries in a step than the bound: the
/// samples stop growing at the bound (phase marks keep their reserved
/// slots), the rest are counted, and the peak is still exact.
#[test]
fn more_scope_boundaries_than_the_bound_keep_the_bound_and_the_exact_peak() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("budgets.yaml");
    // 150 layers × 7 scopes, entered and left: over 2,000 boundaries a forward pass.
    std::fs::write(
        &spec,
        "version: 1
device: { name: card, capacity: 4 GiB }
defaults: { seed: 3, batch_size: 2 }
components:
  deep:
    workload: mamba2
    config: { input_dim: 4, d_model: 8, n_layers: 150, d_inner: 16, d_state: 4, head_dim: 8, chunk_size: 4, seq_len: 4 }
    budgets: { training_peak: < 1 GiB }
",
    )
    .unwrap();
    let r = check(&spec, &dir.path().join("out"));
    let t = timeline(&r, "deep");
    assert!(t.samples.len() <= MAX_SAMPLES, "{}", t.samples.len());
    assert!(t.dropped > 1000, "{}", t.dropped);
    let phases: Vec<String> = t
        .samples
        .iter()
        .filter(|s| matches!(s.event, Event::Phase(_) | Event::End))
        .map(|s| s.event.tag())
        .collect();
    assert_eq!(
        phases,
        [
            "phase:forward",
            "phase:backward",
            "phase:optimizer",
            "end",
            "phase:inference",
            "end"
        ]
    );
    let (training, inference) = span_peaks(&t);
    assert_eq!(training, metric(&r, "deep", "training_peak"));
    assert_eq!(inference, metric(&r, "deep", "inference_peak"));
}

/// A report from an artifact may hold any number of samples; 60,000 of
/// them (1.9 MB) took the comment's compact timeline a minute, since each
/// sample's phase replayed the samples before it (#28 item 13). What is
/// read is cut at what the recorder keeps, and each point's phase is the
/// one `phase_of` names.
#[test]
fn a_timeline_read_keeps_at_most_what_is_recorded_and_compacts_by_phase() {
    use gate_render::timeline::phase_of;
    let mut samples = vec![serde_json::json!("0 0 0 phase:forward")];
    samples.extend((1..60_000u64).map(|i| {
        let event = match i % 700 {
            0 => "phase:backward".to_string(),
            350 => "phase:optimizer".to_string(),
            _ => format!("enter:b{}", i % 7),
        };
        serde_json::json!(format!("{i} {} {} {event}", i * 8, i * 16))
    }));
    let t: Timeline = serde_json::from_value(serde_json::json!({
        "source": "cpu", "base_bytes": 0, "samples": samples, "peak": null
    }))
    .unwrap();
    assert_eq!(t.samples.len(), MAX_SAMPLES, "cut at the recorder's bound");
    assert_eq!(
        t.samples[MAX_SAMPLES - 1].t_us,
        MAX_SAMPLES as u64 - 1,
        "the first ones kept"
    );
    let points = compact(&t, 40);
    assert_eq!(points.len(), 40);
    assert_eq!(
        points.iter().map(|p| p.bytes).max(),
        t.samples.iter().map(|s| s.peak).max(),
        "the peak is a point"
    );
    // Every run's initial is the phase `phase_of` gives its samples.
    let initials: std::collections::BTreeSet<char> = points.iter().filter_map(|p| p.label.chars().next()).collect();
    let expected: std::collections::BTreeSet<char> = (0..t.samples.len())
        .filter_map(|i| phase_of(&t, i).and_then(|p| p.chars().next()))
        .collect();
    assert_eq!(initials, expected);
    // Written out and read back, it compacts the same.
    let again: Timeline = serde_json::from_value(serde_json::to_value(&t).unwrap()).unwrap();
    assert_eq!(compact(&again, 40), points);
}
