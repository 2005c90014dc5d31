//! The spec loader's errors: every malformed spec gets `file:line:col`, what
//! is wrong and a `hint:`, and the exact text is pinned here.

use std::path::Path;

/// (name, spec text, exact error text)
const CASES: &[(&str, &str, &str)] = &[
    (
        "drift_without_an_anchor_has_nothing_to_measure_since",
        r#"version: 1
device: { name: card, capacity: 4 GiB }
components:
  m:
    workload: mlp
    drift: 10%
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:6:12: error: `drift` needs an anchor: the spec has no `anchor:`
  hint: add `anchor: v1.4.0` at the top level: a release tag, or a baseline stored with `gate baseline publish --anchor NAME`; drift is the growth since that report"#,
    ),
    (
        "ratio_budget_without_variants_can_never_be_measured",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
      loss_ratio: < 1.05
"#,
        r#"budgets.yaml:11:7: error: `loss_ratio` on component `m` can never be measured: it has no variants to compare with
  hint: add `variants:` to `m` and put the ratio budget on a variant, or budget `loss` directly"#,
    ),
    (
        "line_break_in_quoted_text_stays_escaped",
        r#"version: 1
device:
  name: card
  capacity: "1\n::error::pwned"
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:4:13: error: device.capacity: unknown size unit `::error::pwned` in `1\n::error::pwned`
  hint: write a number and a unit: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024), e.g. `300 MB`"#,
    ),
    (
        "capacity_rounds_to_zero_bytes",
        r#"version: 1
device:
  name: card
  capacity: 0.0001 B
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:4:13: error: device.capacity: size `0.0001 B` rounds to 0 bytes
  hint: sizes count whole bytes: give at least `1 B`"#,
    ),
    (
        "budget_rounds_to_zero_bytes",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 0.4 B
"#,
        r#"budgets.yaml:10:15: error: budget for `m.params`: size `0.4 B` rounds to 0 bytes
  hint: sizes count whole bytes: give at least `1 B`"#,
    ),
    (
        "anchor",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: &w mlp
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:8:18: error: anchors and tags are not supported in a spec
  hint: write the value out in full"#,
    ),
    (
        "bare_number_budget",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 300
"#,
        r#"budgets.yaml:10:15: error: budget for `m.params`: size `300` has no unit
  hint: write a number and a unit: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024), e.g. `300 MB`"#,
    ),
    (
        "bare_number_capacity",
        r#"version: 1
device:
  name: card
  capacity: 4096
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:4:13: error: device.capacity: size `4096` has no unit
  hint: write a number and a unit: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024), e.g. `300 MB`"#,
    ),
    (
        "batch_size_zero",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    batch_size: 0
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:9:17: error: batch_size must be at least 1, found 0
  hint: give batch_size as a whole number of at least 1"#,
    ),
    (
        "component_not_a_mapping",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m: mlp
"#,
        r#"budgets.yaml:7:6: error: component `m` must be a mapping, found a scalar
  hint: write component `m` as `key: value` lines indented under it"#,
    ),
    (
        "components_empty",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components: {}
"#,
        r#"budgets.yaml:6:13: error: `components` is empty
  hint: add at least one component"#,
    ),
    (
        "config_unknown_key",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    config:
      hiden_dim: 64
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:10:7: error: unknown config key `hiden_dim` (component `m`)
  hint: did you mean `hidden_dim`? this workload takes: input_dim, hidden_dim, hidden_layers, output_dim"#,
    ),
    (
        "config_wrong_type",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    config:
      hidden_dim: big
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:10:19: error: `hidden_dim` must be a whole number of at least 0, found the text `big` (component `m`)
  hint: for example `hidden_dim: 256` (the default)"#,
    ),
    (
        "duplicate_key",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    workload: tft
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:9:5: error: duplicate key `workload` (first at line 8)
  hint: each key may appear once in a mapping; remove or rename one"#,
    ),
    (
        "empty_file",
        r#""#,
        r#"budgets.yaml:1:1: error: the spec is empty
  hint: start with `version: 1`, then `device:` and `components:` (see docs/budgets.md, the budgets.yaml reference)"#,
    ),
    (
        "ensemble_member_twice",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
ensemble:
  members: [m, m]
  budgets:
    total: < 1 GB
"#,
        r#"budgets.yaml:12:16: error: ensemble member `m` is listed twice
  hint: list each component once"#,
    ),
    (
        "ensemble_member_unknown",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
ensemble:
  members: [m, dqn]
  budgets:
    total: < 1 GB
"#,
        r#"budgets.yaml:12:16: error: ensemble member `dqn` is not a component
  hint: members must be components of this spec: m"#,
    ),
    (
        "ensemble_members_not_list",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
ensemble:
  members: m
  budgets:
    total: < 1 GB
"#,
        r#"budgets.yaml:12:12: error: `ensemble.members` must be a list, found a scalar
  hint: write `members: [tft, dqn, ppo]`"#,
    ),
    (
        "ensemble_metric_not_size",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
ensemble:
  members: [m]
  metric: step_time
  budgets:
    total: < 1 GB
"#,
        r#"budgets.yaml:13:11: error: ensemble.metric `step_time` is not a size
  hint: sum a byte metric such as `training_peak` or `inference_peak`"#,
    ),
    (
        "limit_max_and_min",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: { max: 1 MiB, min: 1 KiB }
"#,
        r#"budgets.yaml:10:17: error: budget for `m.params` must have exactly one of `max` or `min`
  hint: e.g. `< 300 MB`, `<= 1 GiB` or `{ max: 300 MB }`"#,
    ),
    (
        "limit_with_an_unknown_key",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    spans: ["<img src=x>"]
    budgets:
      params: { max: 1 MiB, foo: 1 }
"#,
        r#"budgets.yaml:9:13: error: `<img src=x>` is not a span name
  hint: a span's name is the one word the model's code gives it (256 characters at most): no `.` or `#` (gate writes those between and after names), spaces, `<`, `>`, `@`, `|` or backticks
budgets.yaml:11:29: error: unknown key `foo` in the budget for `m.params`
  hint: a limit as a mapping is `max` or `min` alone, e.g. `< 300 MB`, `<= 1 GiB` or `{ max: 300 MB }`"#,
    ),
    (
        "missing_budgets",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
"#,
        r#"budgets.yaml:7:3: error: component `m` has no `budgets`
  hint: add `budgets:` with at least one metric, e.g. `training_peak: < 1 GB`"#,
    ),
    (
        "missing_capacity",
        r#"version: 1
device:
  name: card
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:3:3: error: missing `device.capacity`
  hint: give the card's memory, e.g. `capacity: 4 GiB`"#,
    ),
    (
        "missing_version",
        r#"device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:1:1: error: missing `version`
  hint: add `version: 1` at the top of the spec"#,
    ),
    (
        "negative_capacity",
        r#"version: 1
device:
  name: card
  capacity: -4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:4:13: error: device.capacity: size `-4 GiB` must be greater than zero
  hint: a budget or capacity of zero or less can never be met; give a positive size"#,
    ),
    (
        "variant_unknown_key",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: tft
    variants:
      half: { dtpye: bf16 }
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:10:15: error: unknown key `dtpye` in variant `m@half`
  hint: did you mean `dtype`? variant `m@half` takes: dtype, batch_size, checkpoint, config, budgets, master_weights, spans, generate"#,
    ),
    (
        "component_batch_size_beside_and_in_config",
        r#"version: 1
device: { name: card, capacity: 4 GiB }
components:
  m:
    workload: mlp
    batch_size: 8
    config: { batch_size: 16 }
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:7:15: error: `batch_size` of `m` is given twice (also at line 6)
  hint: keep one: either beside `config:` or in it"#,
    ),
    (
        "variant_dtype_beside_and_in_config",
        r#"version: 1
device: { name: card, capacity: 4 GiB }
components:
  m:
    workload: mlp
    variants:
      half:
        dtype: bf16
        config: { dtype: f16 }
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:9:19: error: `dtype` of `m@half` is given twice (also at line 8)
  hint: keep one: either beside `config:` or in it"#,
    ),
    (
        "variant_bad_config",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: tft
    variants:
      small:
        config: { num_heads: 5 }
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:11:19: error: `num_heads` (5) must divide `hidden_dim` (64) (variant `m@small`)
  hint: each head gets hidden_dim / num_heads features; pick a divisor such as 1, 2 or 4"#,
    ),
    (
        "reference_unknown_variant",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: tft
    reference: plian
    variants:
      plain: { checkpoint: none }
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:9:16: error: `reference` of `m`: no variant `plian`
  hint: did you mean `plain`? variants of `m`: plain"#,
    ),
    (
        "reference_without_variants",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: tft
    reference: plain
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:9:5: error: `reference` of `m` names a variant, but `m` has no `variants`
  hint: add `variants:` (e.g. `plain: { checkpoint: none }`) or remove `reference`"#,
    ),
    (
        "master_weights_with_f32",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: tft
    master_weights: f32
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:9:5: error: `master_weights` of `m` needs `dtype: bf16` or `f16`; `m` computes in f32
  hint: set `dtype: bf16` (or f16) with it, or remove `master_weights`"#,
    ),
    (
        "master_weights_unknown",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: tft
    dtype: bf16
    master_weights: f64
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:10:21: error: unknown master_weights `f64`
  hint: write `master_weights: f32` (f32 parameters, optimizer state and gradients; compute in `dtype`) or `none`"#,
    ),
    (
        "variant_master_weights_with_f32",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: tft
    variants:
      mixed: { master_weights: f32 }
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:10:16: error: `master_weights` of `m@mixed` needs `dtype: bf16` or `f16`; `m@mixed` computes in f32
  hint: set `dtype: bf16` (or f16) with it, or remove `master_weights`"#,
    ),
    (
        "checkpoint_unsupported_workload",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    checkpoint: { chunk: 8 }
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:9:5: error: workload `mlp` of `m` has no position-wise block to checkpoint
  hint: remove `checkpoint:`; it applies to workloads with a position-wise block (tft: the encoder variable selection)"#,
    ),
    (
        "checkpoint_chunk_zero",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: tft
    checkpoint: { chunk: 0 }
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:9:26: error: checkpoint.chunk must be at least 1, found 0
  hint: give checkpoint.chunk as a whole number of at least 1"#,
    ),
    (
        "checkpoint_not_a_mapping",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: tft
    checkpoint: 64
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:9:17: error: `checkpoint` must be `{ chunk: N }` or `none`, found `64`
  hint: write `checkpoint: { chunk: 64 }` (positions per recomputed chunk), or `checkpoint: none`"#,
    ),
    (
        "spans_not_a_list",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    spans: attn
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:9:12: error: `spans` must be a list, found a scalar
  hint: write `spans: [attn, mlp]`: the names the model's `tracing` spans carry"#,
    ),
    (
        "spans_empty_dotted_and_twice",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    spans: [attn, model.attn, attn]
    budgets:
      params: < 1 MiB
  n:
    workload: mlp
    spans: []
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:9:19: error: `model.attn` is not a span name
  hint: a span's name is the one word the model's code gives it (256 characters at most): no `.` or `#` (gate writes those between and after names), spaces, `<`, `>`, `@`, `|` or backticks
budgets.yaml:9:31: error: span `attn` is listed twice
  hint: list each name once
budgets.yaml:14:12: error: `spans` is empty
  hint: list at least one span name, or leave `spans` out to attribute every span but the leaves (`linear`, `rms-norm` ...)"#,
    ),
    (
        "generation_metrics_need_generate_and_a_generation_runs_no_training",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  train:
    workload: mlp
    budgets:
      kv_cache_per_token: < 1 KiB
  gen:
    workload: mlp
    generate: { prefill: 16, decode: 8 }
    budgets:
      decode_growth: < 1 KiB
      training_peak: < 1 MiB
  few:
    workload: mlp
    generate: { prefill: 16, decode: 2 }
    budgets:
      decode_peak: < 1 MiB
"#,
        r#"budgets.yaml:10:7: error: `kv_cache_per_token` of `train` needs a generation: `train` has no `generate:`
  hint: add `generate: { prefill: 64, decode: 32 }` (the prompt's tokens, then the decode steps)
budgets.yaml:16:7: error: `training_peak` of `gen` is not measured: `gen` generates (`generate:` at line 13) and runs no training
  hint: budget it on a component without `generate:` (the same workload can be both); a generating component takes params, prefill_peak, decode_peak, kv_cache_per_token, decode_growth, kv_capacity_tokens
budgets.yaml:19:38: error: generate.decode must be at least 3, found 2
  hint: give at least 3 decode steps: the cache's growth is read from the second on, by halves"#,
    ),
    (
        "checkpoint_unknown_key",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: tft
    checkpoint: { chunks: 64 }
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:9:19: error: unknown key `chunks` in checkpoint
  hint: did you mean `chunk`? checkpoint takes: chunk"#,
    ),
    (
        "no_comparison",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: 1 MiB
"#,
        r#"budgets.yaml:10:15: error: budget for `m.params` has no comparison: `1 MiB`
  hint: write the limit with an operator, e.g. `< 300 MB`, `<= 1 GiB` or `{ max: 300 MB }`"#,
    ),
    (
        "reserve_over_capacity",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 5 GiB
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:5:12: error: device.reserve (5120.0 MiB) is not smaller than device.capacity (4096.0 MiB)
  hint: the reserve is the per-process context cost; it must leave room for the models"#,
    ),
    (
        "step_time_without_unit",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      step_time: < 500
"#,
        r#"budgets.yaml:10:18: error: budget for `m.step_time`: duration `500` has no unit
  hint: write a duration with a unit, ms or s, e.g. `250 ms` or `2 s`"#,
    ),
    (
        "step_time_in_an_unknown_unit",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      step_time: < 1 us
"#,
        r#"budgets.yaml:10:18: error: budget for `m.step_time`: unknown duration unit `us` in `1 us`
  hint: write a duration with a unit, ms or s, e.g. `250 ms` or `2 s`"#,
    ),
    (
        "timing_steps_zero",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    timing: { steps: 0 }
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:9:22: error: timing.steps must be at least 1, found 0
  hint: give timing.steps as a whole number of at least 1"#,
    ),
    (
        "tolerance_without_percent",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    tolerance: 5
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:9:16: error: tolerance: `5` is not a percentage
  hint: write a percentage such as `5%`"#,
    ),
    (
        "unknown_component_key",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budget:
      params: < 1 MiB
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:9:5: error: unknown key `budget` in component `m`
  hint: did you mean `budgets`? component `m` takes: workload, config, batch_size, dtype, seed, tolerance, drift, timing, budgets, checkpoint, variants, reference, master_weights, spans, generate"#,
    ),
    (
        "unknown_dtype",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    dtype: fp32
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:9:12: error: unknown dtype `fp32`
  hint: use one of: f32, f16, bf16"#,
    ),
    (
        "unknown_metric",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      activation: < 1 MiB
"#,
        r#"budgets.yaml:10:7: error: unknown metric `activation` in the budgets of `m`
  hint: did you mean `activations`? metrics: params, activations, gradients, optimizer, training_peak, inference_peak, device_used, step_time, loss, loss_ratio, step_time_ratio, growth, prefill_peak, decode_peak, kv_cache_per_token, decode_growth, model_state, kv_capacity_tokens"#,
    ),
    (
        "unknown_size_unit",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 300 mb
"#,
        r#"budgets.yaml:10:15: error: budget for `m.params`: unknown size unit `mb` in `300 mb`
  hint: write a number and a unit: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024), e.g. `300 MB`"#,
    ),
    (
        "unknown_top_key",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
devices: {}
"#,
        r#"budgets.yaml:11:1: error: unknown key `devices` in the spec
  hint: did you mean `device`? the spec takes: version, device, defaults, components, ensemble, harness, anchor"#,
    ),
    (
        "unknown_workload",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mpl
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:8:15: error: unknown workload `mpl`
  hint: did you mean `mlp`? known workloads: mlp, tft, dqn, ppo, mamba2; a model of your own crate is measured by its harness: add `harness: { package: NAME, bin: NAME }` to the spec (docs/sdk.md)"#,
    ),
    (
        "unquoted_greater_than",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
ensemble:
  members: [m]
  budgets:
    headroom: > 1 GB
"#,
        r#"budgets.yaml:14:15: error: invalid YAML: while scanning a block scalar, did not find expected comment or line break
  hint: a value starting with `>` must be quoted in YAML: write `"> 1 GB"` or `{ min: 1 GB }`"#,
    ),
    (
        "version_2",
        r#"version: 2
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:1:10: error: unsupported spec version `2`
  hint: this gate reads `version: 1`"#,
    ),
    (
        "yaml_syntax_error",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: [< 1 MiB
"#,
        r#"budgets.yaml:11:1: error: invalid YAML: while parsing a flow sequence, expected ',' or ']'
  hint: check the indentation and quoting around this position"#,
    ),
    (
        "zero_size",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 0 MB
"#,
        r#"budgets.yaml:10:15: error: budget for `m.params`: size `0 MB` must be greater than zero
  hint: a budget or capacity of zero or less can never be met; give a positive size"#,
    ),
    (
        "a_harness_feature_that_is_a_cargo_option_is_refused",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
harness:
  package: ml
  bin: gate-harness
  features: [cuda, "--config=build.rustc-wrapper=/tmp/x"]
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:9:20: error: harness.features: `--config=build.rustc-wrapper=/tmp/x` is not a cargo feature name
  hint: name a feature of the harness's crate (letters, digits, `_`, `-`, `+`, `.`, or `dependency/feature`), one per item: `features: [cuda, fast]`"#,
    ),
    (
        "a_harness_package_that_is_a_cargo_option_is_refused",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
harness: { package: "--frozen", bin: "gate harness" }
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:6:21: error: harness.package `--frozen` is not a cargo name
  hint: write the name as in Cargo.toml (letters, digits, `-` and `_`, not starting with `-`), e.g. `package: ml`
budgets.yaml:6:38: error: harness.bin `gate harness` is not a cargo name
  hint: write the name as in Cargo.toml (letters, digits, `-` and `_`, not starting with `-`), e.g. `bin: gate-harness`"#,
    ),
    (
        "a_component_may_not_take_the_ensembles_name",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  ensemble:
    workload: mlp
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:7:3: error: component name `ensemble` is reserved: the report names the ensemble's own rows so
  hint: name the component after its model (e.g. `ensemble_net`); the ensemble's budgets go under the top-level `ensemble:`"#,
    ),
    (
        "a_harness_manifest_must_name_a_cargo_toml",
        r#"version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
harness: { package: ml, bin: gate-harness, manifest: ../ml }
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
"#,
        r#"budgets.yaml:6:54: error: harness.manifest `../ml` is not a path to a Cargo.toml
  hint: give the manifest's path relative to this spec, e.g. `manifest: crates/ml/Cargo.toml`"#,
    ),
];

#[test]
fn every_malformed_spec_gets_its_exact_error() {
    assert!(CASES.len() >= 25);
    let mut mismatches = Vec::new();
    for (name, text, expected) in CASES {
        match gate::test_support::runner::parse(Path::new("budgets.yaml"), text, &gate_builtins::registry())
            .map(|(s, _)| s)
        {
            Ok(_) => mismatches.push(format!("{name}: accepted, expected an error")),
            Err(d) => {
                let got = d.to_string();
                if got != *expected {
                    mismatches.push(format!("{name}:\n  got:      {got:?}\n  expected: {expected:?}"));
                }
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn all_errors_of_a_file_are_reported_in_one_go_in_file_order() {
    let text = "version: 1\ndevice:\n  name: card\n  capacity: 4096\ncomponents:\n  a:\n    workload: mpl\n    budgets:\n      activation: < 1 MiB\n  b:\n    workload: mlp\n    batch_size: 0\n    budgets:\n      params: 3 MB\n";
    let d = gate::test_support::runner::parse(Path::new("budgets.yaml"), text, &gate_builtins::registry()).unwrap_err();
    let lines: Vec<String> = d.0.iter().map(|e| format!("{}:{}", e.pos.line, e.pos.col)).collect();
    assert_eq!(lines, ["4:13", "7:15", "9:7", "12:17", "14:15"]);
    assert!(d.0.iter().all(|e| !e.hint.is_empty()), "every error carries a hint");
}

/// Hostile input, round six (found by a review): a spec nested thousands of
/// levels by indentation is an error at its place, not a stack overflow;
/// numbers that pass their own parse but no arithmetic (a NaN limit, a
/// batch or a process count past any machine) are refused where written;
/// every error has a hint.
#[test]
fn deep_block_nesting_and_numbers_past_any_machine_are_errors_at_their_place() {
    let registry = gate_builtins::registry();
    let parse = |text: &str| {
        gate::test_support::runner::parse(Path::new("budgets.yaml"), text, &registry)
            .map(|_| ())
            .unwrap_err()
    };
    let deep = format!("version: 1\nx:\n  {}1\n", "- ".repeat(4000));
    let e = parse(&deep);
    assert!(
        e.to_string()
            .contains("budgets.yaml:3:513: error: the spec nests mappings and lists deeper than 256 levels"),
        "{e}"
    );
    let mut indented = String::from("version: 1\nx:\n");
    for i in 0..3000 {
        indented += &format!("{}k{i}:\n", "  ".repeat(i + 1));
    }
    assert!(parse(&indented).to_string().contains("deeper than 256 levels"));

    let spec = |component: &str, budgets: &str, ensemble: &str| {
        format!(
            "version: 1\ndevice: {{ name: x, capacity: 4 GiB, reserve: 300 MiB }}\ndefaults: {{ seed: -1 }}\ncomponents:\n  mlp:\n    workload: mlp\n{component}    budgets: {{ {budgets} }}\n{ensemble}"
        )
    };
    let e = parse(&spec(
        "    batch_size: 9223372036854775807\n",
        "params: < 1 MiB",
        "ensemble: { members: [mlp], processes: 99999999999, budgets: { headroom: \"> 1 MiB\" } }\n",
    ));
    let text = e.to_string();
    for says in [
        "budgets.yaml:3:19: error: seed must be a whole number of 0 or more, found `-1`",
        "budgets.yaml:7:17: error: batch_size is 9223372036854775807, more than the 16777216 gate allows",
        "ensemble.processes is 99999999999, more than the 65536 gate allows",
    ] {
        assert!(text.contains(says), "{says}: {text}");
    }
    assert!(
        e.0.iter().all(|d| !d.hint.is_empty()),
        "every error carries a hint: {text}"
    );
    for limit in ["< NaN", "< inf", "< 1e999", "\"> -inf\""] {
        let e = parse(&spec("", &format!("loss: {limit}"), ""));
        assert!(e.to_string().contains("is not a finite number"), "{limit}: {e}");
    }
}

/// A spec of 100,000 unknown keys lists the first 200 problems and counts
/// the rest, instead of holding and printing every one.
#[test]
fn a_spec_of_countless_errors_lists_the_first_and_says_there_are_more() {
    let mut text =
        String::from("version: 1\ndevice: { name: c, capacity: 4 GiB }\ncomponents:\n  m:\n    workload: mlp\n");
    for i in 0..100_000 {
        text += &format!("k{i}: 1\n");
    }
    let d = gate_spec::budget::parse(Path::new("budgets.yaml"), &text).unwrap_err();
    // The 100,000 keys and the component's missing budgets: 200 listed.
    assert_eq!((d.0.len(), d.1), (200, 99_801));
    assert_eq!(
        d.summary(),
        "the spec has 100001 errors; the first 200 are listed: fix them and run `gate validate` again"
    );
    // Listed in file order (of the first 10,000 found: the unknown keys,
    // which the spec's top level is checked for before its components).
    assert_eq!((d.0[0].pos.line, d.0[199].pos.line), (6, 205));
}

#[test]
fn the_repository_specs_are_valid() {
    for path in ["budgets.yaml", "examples/mlp.yaml"] {
        let file = Path::new(env!("GATE_REPO_ROOT")).join(path);
        let (spec, _) = gate::test_support::runner::load(&file, &gate_builtins::registry())
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(!spec.components.is_empty());
    }
}

#[test]
fn limits_accept_every_written_form() {
    let text = "version: 1\ndevice: { name: c, capacity: 4 GiB }\ncomponents:\n  m:\n    workload: mlp\n    budgets:\n      params: < 300 MB\n      gradients: <= 1 GiB\n      optimizer: { max: 2 MiB }\n      step_time: < 2 s\n      loss: < 0.5\nensemble:\n  members: [m]\n  budgets:\n    headroom: \"> 1 GB\"\n    total: { max: 3 GB }\n";
    let spec = gate_spec::budget::parse(Path::new("budgets.yaml"), text).unwrap();
    let b = &spec.components[0].budgets;
    use gate_spec::budget::Op;
    let got: Vec<(Op, f64, usize)> = b.iter().map(|b| (b.limit.op, b.limit.value, b.line)).collect();
    assert_eq!(
        got,
        [
            (Op::Lt, 300e6, 7),
            (Op::Le, 1073741824.0, 8),
            (Op::Le, 2097152.0, 9),
            (Op::Lt, 2000.0, 10),
            (Op::Lt, 0.5, 11)
        ]
    );
    let e = spec.ensemble.unwrap();
    assert_eq!(
        (e.budgets[0].limit.op, e.budgets[0].limit.value, e.budgets[0].line),
        (Op::Gt, 1e9, 15)
    );
    assert_eq!((e.budgets[1].limit.op, e.budgets[1].limit.value), (Op::Le, 3e9));
}

/// `device_used` is read from the CUDA device: on the CPU it can never be
/// measured. An error where the backend is known to be the CPU (`check`,
/// `validate --backend cpu`), a warning where it is not (`validate`).
#[test]
fn device_used_is_refused_on_the_cpu_and_warned_about_without_a_backend() {
    let text = "version: 1\ndevice: { name: card, capacity: 4 GiB }\ncomponents:\n  m:\n    workload: mlp\n    budgets:\n      params: < 1 MiB\n      device_used: < 1 GiB\n  n:\n    workload: mlp\n    budgets: { device_used: < 2 GiB }\n";
    let spec = gate_spec::budget::parse(Path::new("budgets.yaml"), text).unwrap();
    let all = |_: &str| true;
    assert_eq!(
        gate_spec::budget::cuda_only(&spec, &all, true).to_string(),
        "budgets.yaml:8:7: error: `device_used` on component `m` can never be measured on the CPU: it is read from the CUDA device
  hint: run on a GPU (`--backend cuda`), or budget `training_peak`, which every backend measures
budgets.yaml:11:16: error: `device_used` on component `n` can never be measured on the CPU: it is read from the CUDA device
  hint: run on a GPU (`--backend cuda`), or budget `training_peak`, which every backend measures"
    );
    let warnings: Vec<String> = gate_spec::budget::cuda_only(&spec, &all, false)
        .0
        .iter()
        .map(|d| d.warning())
        .collect();
    assert_eq!(
        warnings[0],
        "budgets.yaml:8:7: warning: `device_used` on component `m` is measured on CUDA only: a run on the CPU refuses this spec
  hint: pass `--backend cuda` (or `--backend cpu`) to check the spec for the backend that will run it"
    );
    // Only the components a run selects (`--only m`) are refused.
    assert_eq!(
        gate_spec::budget::cuda_only(&spec, &|c: &str| c == "m", true).0.len(),
        1
    );
    // An ensemble that sums `device_used` has no total on the CPU.
    let text = "version: 1\ndevice: { name: card, capacity: 4 GiB }\ncomponents:\n  m:\n    workload: mlp\n    budgets: { params: < 1 MiB }\nensemble:\n  members: [m]\n  metric: device_used\n  budgets: { total: < 1 GiB }\n";
    let spec = gate_spec::budget::parse(Path::new("budgets.yaml"), text).unwrap();
    assert_eq!(
        gate_spec::budget::cuda_only(&spec, &all, true).to_string(),
        "budgets.yaml:9:11: error: `ensemble.metric: device_used` can never be measured on the CPU: it is read from the CUDA device
  hint: run on a GPU (`--backend cuda`), or sum `training_peak`, which every backend measures"
    );
}

/// A variant's `config:` is read as a component's is: `batch_size` and
/// `dtype` there are settings of the variant, not keys handed to the
/// workload (which would ignore them while the report said otherwise).
#[test]
fn batch_size_and_dtype_in_a_variants_config_are_its_settings() {
    let text = "version: 1\ndevice: { name: c, capacity: 4 GiB }\ncomponents:\n  m:\n    workload: mlp\n    config: { batch_size: 16 }\n    variants:\n      big: { config: { batch_size: 64, dtype: bf16 } }\n    budgets:\n      params: < 1 MiB\n";
    let spec = gate_spec::budget::parse(Path::new("budgets.yaml"), text).unwrap();
    let [base, big] = &spec.components[..] else {
        panic!("two components")
    };
    assert_eq!((base.name.as_str(), base.batch_size), ("m", 16));
    assert_eq!((big.name.as_str(), big.batch_size), ("m@big", 64));
    assert_eq!(big.dtype, gate_spec::budget::DType::BF16);
    // The workload's config (private) as Debug shows it: between `config:` and the next field.
    for c in [base, big] {
        let all = format!("{c:?}");
        let config = &all[all.find("config:").unwrap()..all.find(", batch_size:").unwrap()];
        assert!(!config.contains("batch_size") && !config.contains("dtype"), "{config}");
    }
}

/// A spec whose harness-owned component `h` has a config nested `depth`
/// levels (`config: { a: { a: ... 1 } }`), and a variant with `vdepth`.
fn nested_spec(depth: usize, vdepth: usize) -> String {
    let nest = |d: usize| format!("{}1{}", "{ a: ".repeat(d), " }".repeat(d));
    format!(
        "version: 1\nharness: {{ package: p, bin: b }}\ndevice: {{ name: c, capacity: 4 GiB }}\ncomponents:\n  h:\n    workload: own\n    config: {}\n    variants:\n      v: {{ config: {{ b: {} }} }}\n    budgets:\n      params: < 1 MiB\n",
        nest(depth),
        nest(vdepth.saturating_sub(1)),
    )
}

/// One config depth limit (#43 item 11): a config at it is accepted and
/// the harness's request that carries it reads back; one level deeper, in
/// a component or a variant, or 125 deep, is an error at its position.
#[test]
fn a_config_past_the_depth_limit_is_an_error_at_its_position_and_one_at_it_reads_back() {
    let limit = gate_spec::config::MAX_CONFIG_DEPTH;
    let spec = gate_spec::budget::parse(Path::new("budgets.yaml"), &nested_spec(limit, limit)).unwrap();
    let t = tempfile::tempdir().unwrap();
    let request = t.path().join("request.json");
    std::fs::write(&request, gate::test_support::Request::json(&spec).unwrap()).unwrap();
    let back = gate::test_support::read_request(&request).unwrap_or_else(|e| panic!("{:?}", e.problem));
    assert_eq!(back.spec.components[0].config, spec.components[0].config);

    for (depth, vdepth, at) in [
        (limit + 1, 1, "budgets.yaml:7:95"),
        (125, 1, "budgets.yaml:7:95"),
        (1, limit + 1, "budgets.yaml:9:102"),
    ] {
        let e = gate_spec::budget::parse(Path::new("budgets.yaml"), &nested_spec(depth, vdepth))
            .unwrap_err()
            .to_string();
        let name = if vdepth > 1 { "h@v" } else { "h" };
        assert!(
            e.starts_with(&format!(
                "{at}: error: config of `{name}` nests deeper than 16 levels at `"
            )),
            "{depth}/{vdepth}: {e}"
        );
        assert!(
            e.contains("hint: gate writes a config into its reports and reads it back to 16 levels"),
            "{e}"
        );
    }
}
