use super::*;
use gate_contract::plan::Figure;
use gate_probe::timeline::Event;
use gate_probe::Timeline;

fn effect(phases: &[(&'static str, bool, f64)], time: f64) -> Effect {
    Effect {
        phases: phases.iter().map(|(p, i, v)| ((*p, *i), *v)).collect(),
        bytes: BTreeMap::new(),
        time,
        loss: 1.0,
        rows: None,
        micro_batches: false,
        positions: None,
    }
}

/// A lever of the rows at ratio `rho` that changes nothing else.
fn rows(rho: f64) -> Effect {
    Effect {
        rows: Some(rho),
        ..Effect::none()
    }
}

#[test]
fn two_levers_of_the_rows_multiply_where_they_alone_move_a_figure() {
    // 100 fixed + 5,300 that scales with the rows; half the batch and
    // half the length each measured alone at 2,750.
    let start = 5400.0;
    let both = [rows(0.5), rows(0.5)];
    let d = moved(start, &both, |_| 2750.0 - start, |_| 0.0);
    assert_eq!(start + d, 100.0 + 5300.0 * 0.25);
    // One alone is its probe.
    assert_eq!(start + moved(start, &both[..1], |_| 2750.0 - start, |_| 0.0), 2750.0);
}

/// The llama of tests/adopters/transformers-0-11 through `lm`, measured on
/// the CPU: 139,288 B of activations at batch 8 × 64 tokens, 40,096 B at
/// four micro-batches of 2, and 139,288 B at 32 tokens and at 16 (what its
/// forward keeps grows with the batch, not with the length). Four
/// micro-batches of 2 at 16 tokens measured 40,096 B; one fixed part
/// averaged over both probes predicted 77,293 B.
#[test]
fn a_lever_of_the_rows_that_leaves_a_figure_does_not_scale_what_another_moves() {
    let start = 139_288.0;
    let probe = |e: &Effect| if e.rows == Some(0.25) { 40_096.0 } else { start };
    let both = start + moved(start, &[rows(0.25), rows(0.5)], |e| probe(e) - start, |_| 0.0);
    assert!((both - 40_096.0).abs() < 1e-6, "{both}");
    // Where one lever scales a part of what the other does, that part
    // multiplies and the rest follows the larger lever alone: 1,000 fixed,
    // 6,000 scaled by both, 3,000 by the first alone.
    let start = 10_000.0;
    let probe = |e: &Effect| {
        if e.rows == Some(0.25) {
            1_000.0 + 9_000.0 * 0.25
        } else {
            4_000.0 + 6_000.0 * 0.5
        }
    };
    let both = start + moved(start, &[rows(0.25), rows(0.5)], |e| probe(e) - start, |_| 0.0);
    assert!(
        (both - (1_000.0 + 3_000.0 * 0.25 + 6_000.0 * 0.125)).abs() < 1e-6,
        "{both}"
    );
}

/// The MLP of tests/it/plan.rs, measured on the CPU (MiB): 63.067 at
/// batch 4096 in f32, 17.106 at batch 1024, 33.180 in bf16 (its f32
/// masters add 0.254 of parameters), 9.950 both. Added, the two cuts made
/// −12.8; in proportion 9.0 (−9.5 %).
#[test]
fn a_lever_of_the_rows_and_one_that_is_not_compose_on_the_rows_part() {
    let start = 63.067;
    let bf16 = Effect {
        bytes: [(Metric::Params, 0.254)].into_iter().collect(),
        ..Effect::none()
    };
    let quarter = rows(0.25);
    let probe = |e: &Effect| if e.rows.is_some() { 17.106 } else { 33.180 };
    let both = start + moved(start, &[bf16.clone(), quarter.clone()], |e| probe(e) - start, state_of);
    assert!((both - 9.950).abs() / 9.950 < 0.02, "{both}");
    // The optimizer's phase: the batch leaves it (all of it fixed), and
    // AdamW in slices takes its temporaries: all of that stays taken.
    let slices = Effect::none();
    let optimizer = 300.0;
    let d = moved(
        optimizer,
        &[quarter.clone(), slices],
        |e| if e.rows.is_some() { 0.0 } else { -150.0 },
        state_of,
    );
    assert_eq!(optimizer + d, 150.0);
    // SGD drops AdamW's state (fixed) where the rows hold the most: the
    // quarter batch keeps a quarter of the rows, and all of the drop.
    let sgd = Effect {
        bytes: [(Metric::Optimizer, -40.0)].into_iter().collect(),
        ..Effect::none()
    };
    let forward = 1000.0; // 100 fixed (40 of it AdamW's) + 900 of rows
    let d = moved(
        forward,
        &[quarter.clone(), sgd],
        |e| {
            if e.rows.is_some() {
                100.0 + 225.0 - forward
            } else {
                -40.0
            }
        },
        state_of,
    );
    assert!((forward + d - (60.0 + 225.0)).abs() < 1e-9, "{}", forward + d);
    // Without a lever of the rows, two cuts of the same bytes compose in
    // proportion rather than taking more than the figure holds.
    let d = moved(5400.0, &[Effect::none(), Effect::none()], |_| -3000.0, |_| 0.0);
    assert!((5400.0 + d - 5400.0 * (2400.0 / 5400.0f64).powi(2)).abs() < 1e-9);
    // A figure the start does not have (a recompute's own part) is added to.
    assert_eq!(moved(0.0, &[quarter], |_| 180.0, |_| 0.0), 180.0);
}

#[test]
fn levers_on_different_phases_compose_where_the_peak_moves() {
    // The start: its peak in backward (1000), optimizer 300.
    let start = Figures {
        values: [(Metric::TrainingPeak, 1000.0)].into_iter().collect(),
        phase_peaks: [
            (("forward", false), 600.0),
            (("backward", false), 1000.0),
            (("optimizer", false), 300.0),
        ]
        .into_iter()
        .collect(),
        offset: 0.0,
        positions: None,
    };
    let c = component_with(&[(Metric::TrainingPeak, 250.0)]);
    // Checkpointing takes backward outside the block to 200 and puts
    // its recompute (inside the block) at 180; the peak is then the
    // optimizer's 300. Slicing takes the optimizer to 150.
    let ckpt = effect(
        &[
            ("forward", false, -500.0),
            ("backward", false, -800.0),
            ("backward", true, 180.0),
        ],
        1.5,
    );
    let slice = effect(&[("optimizer", false, -150.0)], 1.0);
    let alone = predict(&c, &start, std::slice::from_ref(&ckpt));
    assert_eq!(alone[&Metric::TrainingPeak].predicted, 300.0);
    let both = predict(&c, &start, &[ckpt, slice]);
    assert_eq!(both[&Metric::TrainingPeak].predicted, 200.0);
    assert_eq!(both[&Metric::StepTimeRatio].predicted, 1.5);
}

/// The llama of tests/adopters/transformers-0-11 (bytes, rounded): batch
/// 8 at 64 tokens with AdamW peaks in its forward at 36.85 MB (params 3.95,
/// AdamW 7.86, logits and the rest 25.04), backward 13.55; four micro-batches
/// of 2 put a micro-batch's forward inside the backward with the summed
/// gradients (0.51 MB). At half the length with SGD it measured 7.53 MB,
/// in its backward.
#[test]
fn micro_batches_put_a_forward_and_the_summed_gradients_in_the_backward() {
    let start = Figures {
        values: [(Metric::TrainingPeak, 36.85), (Metric::Gradients, 0.51)]
            .into_iter()
            .collect(),
        phase_peaks: [(("forward", false), 36.85), (("backward", false), 13.55)]
            .into_iter()
            .collect(),
        offset: 0.0,
        positions: None,
    };
    let c = component_with(&[(Metric::TrainingPeak, 30.0)]);
    let step = |rho: f64, forward: f64, micro_batches: bool| Effect {
        rows: Some(rho),
        micro_batches,
        ..effect(&[("forward", false, forward), ("backward", false, 0.0)], 1.0)
    };
    let sgd = Effect {
        bytes: [(Metric::Optimizer, -7.86)].into_iter().collect(),
        ..effect(&[("forward", false, -7.86), ("backward", false, -7.86)], 1.0)
    };
    // Four micro-batches: the first forward holds a quarter of the rows.
    let forward = 11.81 + 25.04 / 4.0;
    let micro = step(0.25, forward - 36.85, true);
    let half = step(0.5, 11.81 + 25.04 / 2.0 - 36.85, false);
    let k = predict(&c, &start, &[micro.clone(), sgd.clone(), half.clone()]);
    let first_forward = 3.95 + 25.04 / 8.0;
    let peak = k[&Metric::TrainingPeak].predicted;
    assert!((peak - (first_forward + 0.51)).abs() < 1e-9, "{peak}");
    // A quarter of the batch in one step keeps its backward as it was.
    let quarter = step(0.25, forward - 36.85, false);
    let k = predict(&c, &start, &[quarter, sgd, half]);
    let peak = k[&Metric::TrainingPeak].predicted;
    assert!((peak - first_forward).abs() < 1e-9, "{peak}");
}

/// qwen2 of tests/adopters/transformers-0-11 (bytes): inference peak
/// 6,109,861 at batch 8 in f32; bf16 with f32 masters adds 973,480 B of
/// parameters (their casts) and leaves the peak at 6,144,285: the rows'
/// part shrank by about what the parameters added. A quarter of the batch:
/// 3,059,341. Both measured 3,800,749; with the added parameters read as
/// rows, 3.07 MB was predicted.
#[test]
fn the_inference_peak_keeps_the_parameters_a_lever_adds_outside_the_rows() {
    let start = Figures {
        values: [(Metric::InferencePeak, 6_109_861.0), (Metric::Params, 2_011_884.0)]
            .into_iter()
            .collect(),
        ..Figures::default()
    };
    let c = component_with(&[(Metric::InferencePeak, 4e6)]);
    let bf16 = Effect {
        bytes: [(Metric::InferencePeak, 34_424.0), (Metric::Params, 973_480.0)]
            .into_iter()
            .collect(),
        ..Effect::none()
    };
    let quarter = Effect {
        bytes: [(Metric::InferencePeak, 3_059_341.0 - 6_109_861.0)]
            .into_iter()
            .collect(),
        ..rows(0.25)
    };
    let k = predict(&c, &start, &[bf16, quarter]);
    let peak = k[&Metric::InferencePeak].predicted;
    assert!((peak - 3_800_749.0).abs() / 3_800_749.0 < 0.01, "{peak}");
}

#[test]
fn a_chunk_between_two_probes_is_interpolated_in_bytes_and_in_chunks() {
    let o = Options {
        lever: Lever::Checkpoint {
            blocks: vec![],
            chunks: vec![32, 64, 128],
        },
        current: Setting::Checkpoint { chunk: None },
        others: [32, 64, 128].map(|n| Setting::Checkpoint { chunk: Some(n) }).to_vec(),
    };
    let probed: BTreeMap<usize, (Setting, Effect)> = [
        (
            0,
            (
                Setting::Checkpoint { chunk: Some(32) },
                effect(&[("backward", true, 300.0)], 2.0),
            ),
        ),
        (
            1,
            (
                Setting::Checkpoint { chunk: Some(128) },
                effect(&[("backward", true, 600.0)], 1.25),
            ),
        ),
    ]
    .into_iter()
    .collect();
    let e = effect_of(&o, &probed, &Setting::Checkpoint { chunk: Some(64) }).unwrap();
    // Bytes: a third of the way from 32 to 128.
    assert_eq!(e.phases[&("backward", true)], 400.0);
    // Time: 1/64 lies 2/3 of the way from 1/32 to 1/128.
    assert!((e.time - 1.5).abs() < 1e-12, "{}", e.time);
    assert_eq!(probe_settings(&o).len(), 2);
}

/// The TFT at batch 2 × 80 steps: 160 positions. Chunks 160, 320 and 640
/// are one chunk of them, the same run (tests/it/plan.rs measures it).
#[test]
fn a_chunk_past_the_blocks_positions_is_one_chunk_of_them() {
    let chunks = [32, 64, 96, 160, 320, 640];
    let o = Options {
        lever: Lever::Checkpoint {
            blocks: vec!["encoder_vsn".into()],
            chunks: chunks.to_vec(),
        },
        current: Setting::Checkpoint { chunk: None },
        others: chunks.map(|n| Setting::Checkpoint { chunk: Some(n) }).to_vec(),
    };
    let at = |n: usize| Setting::Checkpoint { chunk: Some(n) };
    let probe = |bytes: f64, time: f64| Effect {
        positions: Some(160),
        ..effect(&[("backward", true, bytes)], time)
    };
    let probed: BTreeMap<usize, (Setting, Effect)> =
        [(0, (at(32), probe(100.0, 1.5))), (1, (at(640), probe(500.0, 1.0)))]
            .into_iter()
            .collect();
    assert_eq!(positions_of(&probed), Some(160));
    // The probe at 640 ran one chunk of 160: 160 and 320 are that run.
    for n in [160, 320] {
        let e = effect_of(&o, &probed, &at(n)).unwrap();
        assert_eq!(e.phases[&("backward", true)], 500.0, "chunk {n}");
        assert_eq!(e.time, 1.0, "chunk {n}");
    }
    // 96 lies between 32 and 160 (not 640): bytes half-way, time in the
    // number of chunks (1/96 between 1/32 and 1/160).
    let e = effect_of(&o, &probed, &at(96)).unwrap();
    assert_eq!(e.phases[&("backward", true)], 300.0);
    let w = (1.0 / 96.0 - 1.0 / 32.0) / (1.0 / 160.0 - 1.0 / 32.0);
    assert!((e.time - (1.5 - 0.5 * w)).abs() < 1e-12, "{}", e.time);
    // 320 and 640 are the same run as 160, the smallest chunk that covers
    // the positions: neither predicted as a candidate of its own nor probed
    // again; 160 is not probed either (the probe at 640 ran it).
    assert!(!same_run_as_another(&o, &probed, &at(160)));
    assert!(same_run_as_another(&o, &probed, &at(320)));
    assert!(same_run_as_another(&o, &probed, &at(640)));
    assert!(ran_as_probed(&o, &probed, &at(160)));
    assert!(!ran_as_probed(&o, &probed, &at(96)));
    // Without positions (a workload whose blocks ran whole, an older
    // harness), every chunk is its own point, as before.
    let unsaid: BTreeMap<usize, (Setting, Effect)> = probed
        .iter()
        .map(|(k, (s, e))| {
            (
                *k,
                (
                    s.clone(),
                    Effect {
                        positions: None,
                        ..e.clone()
                    },
                ),
            )
        })
        .collect();
    assert!(!same_run_as_another(&o, &unsaid, &at(320)));
    let e = effect_of(&o, &unsaid, &at(160)).unwrap();
    assert!(e.phases[&("backward", true)] < 500.0);
}

#[test]
fn a_sample_peak_belongs_to_where_the_step_was_before_its_event() {
    use gate_probe::timeline::Sample;
    let s = |peak, event| Sample {
        t_us: 0,
        live: 0,
        peak,
        event,
    };
    let t = Timeline {
        source: "cpu".into(),
        base_bytes: 0,
        samples: vec![
            s(0, Event::Phase("forward".into())),
            s(50, Event::Enter("tft.encoder_vsn".into())),
            s(60, Event::Exit("tft.encoder_vsn".into())),
            s(70, Event::Phase("backward".into())),
            s(80, Event::Enter("encoder_vsn (recompute)".into())),
            s(95, Event::Exit("encoder_vsn (recompute)".into())),
            s(90, Event::Phase("optimizer".into())),
            s(40, Event::End),
        ],
        dropped: 0,
        peak: None,
    };
    let p = phase_peaks(&t, &["encoder_vsn".to_string()]);
    assert_eq!(p[&("forward", false)], 70.0);
    assert_eq!(p[&("forward", true)], 60.0);
    assert_eq!(p[&("backward", false)], 90.0);
    assert_eq!(p[&("backward", true)], 95.0);
    assert_eq!(p[&("optimizer", false)], 40.0);
    // No blocks: nothing inside.
    assert!(phase_peaks(&t, &[]).keys().all(|(_, inside)| !inside));
}

#[test]
fn the_recompute_floor_is_each_blocks_forward_time_in_the_sampled_step() {
    use gate_probe::timeline::Sample;
    let s = |t_us, event| Sample {
        t_us,
        live: 0,
        peak: 0,
        event,
    };
    let t = Timeline {
        source: "cpu".into(),
        base_bytes: 0,
        samples: vec![
            s(1_000, Event::Phase("forward".into())),
            // Under a scope of the workload's own, twice (two calls).
            s(2_000, Event::Enter("tft.encoder_vsn".into())),
            s(2_500, Event::Enter("tft.encoder_vsn.grn".into())),
            s(3_000, Event::Exit("tft.encoder_vsn.grn".into())),
            s(6_000, Event::Exit("tft.encoder_vsn".into())),
            s(7_000, Event::Enter("tft.encoder_vsn".into())),
            s(8_000, Event::Exit("tft.encoder_vsn".into())),
            s(8_000, Event::Enter("lstm".into())),
            s(9_000, Event::Exit("lstm".into())),
            s(10_000, Event::Phase("backward".into())),
            // The recompute in backward is no forward time.
            s(11_000, Event::Enter("encoder_vsn (recompute)".into())),
            s(15_000, Event::Exit("encoder_vsn (recompute)".into())),
            s(20_000, Event::Phase("optimizer".into())),
            s(21_000, Event::End),
            // The inference call is another span.
            s(0, Event::Phase("inference".into())),
            s(100, Event::Enter("tft.encoder_vsn".into())),
            s(900, Event::Exit("tft.encoder_vsn".into())),
            s(1_000, Event::End),
        ],
        dropped: 0,
        peak: None,
    };
    let floor = recompute_floor(&t, &["encoder_vsn".to_string()]).unwrap();
    assert_eq!(
        floor.forward_ms,
        [("encoder_vsn".to_string(), 5.0)].into_iter().collect()
    );
    assert_eq!(floor.step_ms, 20.0);
    assert_eq!(floor.factor(), 1.25);
    assert!(recompute_floor(&t, &["decoder_vsn".to_string()]).is_none());

    // A step-time ceiling the floor alone passes leaves the checkpoint to
    // its probes; one it fails rules every chunk out.
    let c = component_with(&[(Metric::StepTimeRatio, 1.3)]);
    assert_eq!(floor_fails_time(&c, 1.0, &floor), None);
    assert_eq!(floor_fails_time(&c, 1.1, &floor), Some(1.1 * 1.25));
    let no_ceiling = component_with(&[(Metric::TrainingPeak, 1e6)]);
    assert_eq!(floor_fails_time(&no_ceiling, 3.0, &floor), None);
}

#[test]
fn a_setting_along_for_the_ride_is_no_reason_to_rank_a_candidate_first() {
    let config = |key: &str, value: serde_json::Value| Setting::Config { key: key.into(), value };
    let (sgd, slices) = (config("optimizer", "sgd".into()), config("adamw_slice", 262144.into()));
    let chunk = Setting::Checkpoint { chunk: Some(64) };
    let candidate = |settings: &[&Setting], time: f64, outcome: Outcome| Candidate {
        settings: settings.iter().map(|s| (*s).clone()).collect(),
        figures: [(
            Metric::StepTimeRatio,
            Figure {
                predicted: time,
                measured: None,
            },
        )]
        .into_iter()
        .collect(),
        outcome,
        fails: Vec::new(),
        error: None,
    };
    let all = [
        // The slices' probe came out 5 % faster by chance: SGD alone passes.
        candidate(&[&sgd], 1.0, Outcome::PredictedPass),
        candidate(&[&sgd, &slices], 0.95, Outcome::PredictedPass),
        // The chunk alone fails: the slices are what makes it pass.
        candidate(&[&chunk], 1.5, Outcome::PredictedFail),
        candidate(&[&chunk, &slices], 1.5, Outcome::PredictedPass),
        // Faster beyond the noise: a reason of its own.
        candidate(&[&sgd, &chunk], 0.8, Outcome::PredictedPass),
    ];
    let riders: Vec<bool> = all.iter().map(|k| carries_a_rider(k, &all)).collect();
    assert_eq!(riders, [false, true, false, false, false]);
}

fn component_with(budgets: &[(Metric, f64)]) -> Component {
    let yaml = "version: 1\ndevice: { name: card, capacity: 4 GiB, reserve: 300 MiB }\ncomponents:\n  m:\n    workload: mlp\n    budgets:\n      training_peak: < 1 GB\n";
    let spec = gate_spec::budget::parse_bytes(Path::new("b.yaml"), yaml.as_bytes()).unwrap();
    let mut c = spec.components[0].clone();
    for (b, (m, v)) in c.budgets.iter_mut().zip(budgets) {
        b.metric = *m;
        b.limit.value = *v;
    }
    c
}

/// Profiles side by side only as many as the memory holds: the plain
/// TFT's 5.4 GB start leaves room for two on 24 GB, one on 8 GB.
#[test]
fn a_plan_runs_no_more_profiles_at_once_than_the_memory_holds() {
    let gib = 1u64 << 30;
    let tft = 5386.7 * 1024.0 * 1024.0;
    assert_eq!(jobs_in_memory(2, tft, 22 * gib), 2);
    assert_eq!(jobs_in_memory(16, tft, 22 * gib), 3);
    assert_eq!(jobs_in_memory(2, tft, 8 * gib), 1);
    // Even where one does not fit, one runs (its own failure says so).
    assert_eq!(jobs_in_memory(4, tft, gib), 1);
    assert_eq!(jobs_in_memory(4, 0.0, gib), 4);
}
