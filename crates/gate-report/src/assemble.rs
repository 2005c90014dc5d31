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
    let mut report = ComponentReport {
        workload: c.kind.clone(),
        dtype: c.dtype.as_str().into(),
        batch_size: c.batch_size,
        seed: c.seed,
        fingerprint: component_fingerprint(c, &config),
        config,
        metrics,
        param_count: m.param_elems,
        blocks: ComponentReport::blocks_from(&m.blocks, activations)
            .into_iter()
            .map(|mut b| {
                b.at_exit_bytes = m.block_exit_bytes.get(&b.name).copied();
                b
            })
            .collect(),
        error: m.failure.as_ref().map(|f| ComponentError {
            kind: ErrorKind::Failed,
            phase: Some(f.phase.to_string()),
            reason: f.reason.clone(),
            peak_bytes: m.failure_peak_bytes,
            failure_kind: Some(f.kind),
        }),
        reference: c.reference.clone(),
        master_dtype: c.master_dtype.map(|d| d.as_str().to_string()),
        phase_seconds: m
            .phase_seconds
            .iter()
            .map(|(p, s)| PhaseTime {
                phase: p.to_string(),
                seconds: *s,
            })
            .collect(),
        ratio_losses: m
            .ratio_losses
            .map(|(variant, reference)| RatioLosses { variant, reference }),
        ..ComponentReport::default()
    };
    report.copy_profile_facts(m);
    // report.json names the source only where it is not the exact counter.
    report.memory_source = report.memory_source.filter(|s| !s.is_exact());
    report
}

pub fn not_measured_report(c: &Component, reason: &str) -> ComponentReport {
    ComponentReport {
        workload: c.kind.clone(),
        dtype: c.dtype.as_str().into(),
        batch_size: c.batch_size,
        seed: c.seed,
        fingerprint: component_fingerprint(c, &serde_json::Value::Null),
        error: Some(ComponentError {
            kind: ErrorKind::NotMeasured,
            phase: None,
            reason: reason.into(),
            peak_bytes: None,
            failure_kind: None,
        }),
        reference: c.reference.clone(),
        master_dtype: c.master_dtype.map(|d| d.as_str().to_string()),
        ..ComponentReport::default()
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
