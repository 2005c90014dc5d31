//! Measurements → report records (still pure: the caller supplies everything).

use std::collections::BTreeMap;

use gate_contract::measurement::Measurement;
use gate_probe::DeviceInfo;
use gate_spec::budget::Component;
use gate_spec::metric::Metric;

use gate_contract::report::*;

fn component_fingerprint(c: &Component, config: &serde_json::Value) -> String {
    let mut key = format!("{}|{}|{}|{}|{}", c.kind, c.dtype.as_str(), c.batch_size, c.seed, config);
    // Mixed precision only: older reports' fingerprints stay as they were.
    if let Some(m) = c.master_dtype {
        key.push_str(&format!("|master={}", m.as_str()));
    }
    format!("{:016x}", gate_spec::hash::fnv1a(&key))
}

pub fn component_report(c: &Component, config: serde_json::Value, m: &Measurement) -> ComponentReport {
    let metrics: BTreeMap<Metric, MetricValue> = m
        .values
        .iter()
        .map(|(k, v)| {
            (
                *k,
                MetricValue {
                    value: *v,
                    unit: k.unit(),
                },
            )
        })
        .collect();
    let activations = m.values.get(&Metric::Activations).copied();
    ComponentReport {
        workload: c.kind.clone(),
        dtype: c.dtype.as_str().into(),
        batch_size: c.batch_size,
        seed: c.seed,
        fingerprint: component_fingerprint(c, &config),
        config,
        metrics,
        param_count: m.param_elems,
        analytic_params_bytes: m.analytic_params_bytes,
        param_tensors: m.param_tensors,
        batch_bytes: m.batch_bytes,
        unpruned_gradient_bytes: m.unpruned_gradient_bytes,
        context_reserve_bytes: m.context_reserve_bytes,
        pool_reserved_peak_bytes: m.pool_reserved_peak_bytes,
        emulated_block_bytes: m.emulated_block_bytes,
        warmup_error: m.warmup_error.clone(),
        blocks: ComponentReport::blocks_from(&m.blocks, activations)
            .into_iter()
            .map(|mut b| {
                b.at_exit_bytes = m.block_exit_bytes.get(&b.name).copied();
                b
            })
            .collect(),
        step_times_ms: m.step_times_ms.clone(),
        losses: m.losses.clone(),
        error: m.failure.as_ref().map(|f| ComponentError {
            kind: ErrorKind::Failed,
            phase: Some(f.phase.to_string()),
            reason: f.reason.clone(),
            peak_bytes: m.failure_peak_bytes,
            failure_kind: Some(f.kind),
        }),
        reference: c.reference.clone(),
        master_dtype: c.master_dtype.map(|d| d.as_str().to_string()),
        profile_seconds: m.profile_seconds,
        turn_wait_seconds: m.turn_wait_seconds,
        phase_seconds: m
            .phase_seconds
            .iter()
            .map(|(p, s)| PhaseTime {
                phase: p.to_string(),
                seconds: *s,
            })
            .collect(),
        timeline: m.timeline.clone(),
        step_time_ratios: m.step_time_ratios.clone(),
        ratio_error: m.ratio_error.clone(),
        ratio_losses: m
            .ratio_losses
            .map(|(variant, reference)| RatioLosses { variant, reference }),
        ratio_lifted_bytes: m.ratio_lifted_bytes,
        checkpointed: m.checkpointed.clone(),
        memory_source: m.memory_source.filter(|s| !s.is_exact()),
        gradient_coverage: m.gradient_coverage.clone(),
        gradient_live_bytes: m.gradient_live_bytes,
        kv_capacity_check: m.kv_capacity_check.clone(),
        param_live_bytes: m.param_live_bytes,
        spans_entered: m.spans_entered.clone(),
        spans_unavailable: m.spans_unavailable.clone(),
    }
}

pub fn not_measured_report(c: &Component, reason: &str) -> ComponentReport {
    ComponentReport {
        workload: c.kind.clone(),
        dtype: c.dtype.as_str().into(),
        batch_size: c.batch_size,
        seed: c.seed,
        fingerprint: component_fingerprint(c, &serde_json::Value::Null),
        config: serde_json::Value::Null,
        metrics: BTreeMap::new(),
        param_count: 0,
        analytic_params_bytes: 0,
        param_tensors: 0,
        batch_bytes: 0,
        unpruned_gradient_bytes: 0,
        context_reserve_bytes: None,
        pool_reserved_peak_bytes: None,
        emulated_block_bytes: None,
        warmup_error: None,
        blocks: Vec::new(),
        step_times_ms: Vec::new(),
        losses: Vec::new(),
        error: Some(ComponentError {
            kind: ErrorKind::NotMeasured,
            phase: None,
            reason: reason.into(),
            peak_bytes: None,
            failure_kind: None,
        }),
        reference: c.reference.clone(),
        master_dtype: c.master_dtype.map(|d| d.as_str().to_string()),
        profile_seconds: None,
        turn_wait_seconds: 0.0,
        phase_seconds: Vec::new(),
        timeline: None,
        step_time_ratios: Vec::new(),
        ratio_error: None,
        ratio_losses: None,
        ratio_lifted_bytes: None,
        checkpointed: Vec::new(),
        memory_source: None,
        gradient_coverage: None,
        gradient_live_bytes: None,
        kv_capacity_check: None,
        param_live_bytes: None,
        spans_entered: Vec::new(),
        spans_unavailable: None,
    }
}

/// The testbed of a run on `device`, whose models ran on `framework`
/// (`legacy_version`: its version under the testbed's legacy field, when
/// its harness gave one, else empty).
pub fn testbed(
    device: &DeviceInfo,
    spec: &gate_spec::budget::Spec,
    framework: &gate_contract::protocol::FrameworkId,
    legacy_version: &str,
) -> Testbed {
    Testbed {
        backend: device.backend.clone(),
        device_name: device.name.clone(),
        capacity_bytes: spec.device.capacity.0,
        gated_device: spec.device.name.clone(),
        device_total_bytes: device.total_bytes,
        driver: device.driver.clone(),
        cuda: device.cuda.clone(),
        legacy_version: legacy_version.into(),
        framework: framework.clone(),
        os: std::env::consts::OS.into(),
        arch: std::env::consts::ARCH.into(),
    }
}
