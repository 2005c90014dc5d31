//! The profile and a probe that can only tell where the bytes come
//! from once the parameters exist (the CUDA probe's case), on a toy
//! session whose "device" is a byte counter.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::super::profile;
use super::*;
use crate::adapter::{Analytic, Error, Result, StandInOptimizer};
use gate_probe::Recorder;
use gate_probe::{BackendError, MemoryProbe, MemorySource};

const PARAMS: u64 = 4096;
/// A library workspace the first forward allocates and keeps (cuBLAS's).
const WORKSPACE: u64 = 1024;

/// The toy device: bytes its tensors hold, and whether the workspace is made.
#[derive(Default)]
struct Device {
    bytes: AtomicU64,
    workspace: AtomicBool,
}

/// A toy tensor of `n` bytes on the device.
struct Buf(Arc<Device>, u64);

impl Buf {
    fn new(d: &Arc<Device>, n: u64) -> Buf {
        d.bytes.fetch_add(n, Ordering::SeqCst);
        Buf(d.clone(), n)
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        self.0.bytes.fetch_sub(self.1, Ordering::SeqCst);
    }
}

/// A probe of a framework that does not allocate from the pool: the
/// pool reads 0, the process's growth is its tensors and the workspace.
struct NoPoolProbe {
    device: Arc<Device>,
    switched: Mutex<Option<MemorySource>>,
    high: AtomicU64,
    told: AtomicU64,
    fail: AtomicBool,
}

impl NoPoolProbe {
    fn new(device: &Arc<Device>) -> Self {
        NoPoolProbe {
            device: device.clone(),
            switched: Mutex::new(None),
            high: AtomicU64::new(0),
            told: AtomicU64::new(0),
            fail: AtomicBool::new(false),
        }
    }
    fn nvml(&self) -> bool {
        *self.switched.lock().unwrap() == Some(MemorySource::NvmlProcess)
    }
    fn process(&self) -> u64 {
        self.device.bytes.load(Ordering::SeqCst)
    }
}

impl MemoryProbe for NoPoolProbe {
    fn backend(&self) -> &'static str {
        "cuda"
    }
    fn live(&self) -> u64 {
        if !self.nvml() {
            return 0; // the empty pool
        }
        let v = self.process();
        self.high.fetch_max(v, Ordering::SeqCst);
        v
    }
    fn peak(&self) -> u64 {
        if self.nvml() {
            self.high.load(Ordering::SeqCst).max(self.live())
        } else {
            0
        }
    }
    fn reset_peak(&self) {
        self.high
            .store(if self.nvml() { self.process() } else { 0 }, Ordering::SeqCst);
    }
    fn memory_source(&self) -> MemorySource {
        self.switched.lock().unwrap().unwrap_or(MemorySource::CudaPool)
    }
    fn params_built(&self) -> std::result::Result<(), BackendError> {
        self.told.fetch_add(1, Ordering::SeqCst);
        if self.fail.load(Ordering::SeqCst) {
            return Err(BackendError::new("no byte figure can be measured").with_hint("check `nvidia-smi`"));
        }
        if self.device.bytes.load(Ordering::SeqCst) > 0 {
            *self.switched.lock().unwrap() = Some(MemorySource::NvmlProcess);
        }
        Ok(())
    }
}

struct Toy {
    device: Arc<Device>,
    /// Builds that fail before the next one succeeds (a warm-up that runs out).
    failing_builds: Cell<usize>,
    /// Models built so far.
    builds: Cell<usize>,
    /// A table each model's build makes beside its parameters (a rope table).
    table: u64,
    /// A cache each forward leaves full, emptied by `clear_state`.
    cache: u64,
    /// The optimizer state as the adapter counts it (`optimizer_bytes`).
    counted: Option<u64>,
    /// AMSGrad's running maximum: a third buffer of the parameters'
    /// size that parts from the second moment at the second step.
    amsgrad: bool,
    /// What the optimizer keeps beside its state's data (its list of
    /// the variables); made again over stand-ins by
    /// `stand_in_optimizer` where it is not 0.
    books: u64,
}

struct Params<'s>(&'s Toy);

impl<'s> Unbuilt for Params<'s> {
    type Trainer = Trainer;
    fn build(self) -> Result<Trainer> {
        if self.0.failing_builds.get() > 0 {
            self.0.failing_builds.set(self.0.failing_builds.get() - 1);
            return Err(Error::msg("out of memory"));
        }
        self.0.builds.set(self.0.builds.get() + 1);
        Ok(Trainer {
            device: self.0.device.clone(),
            _params: Buf::new(&self.0.device, PARAMS),
            optimizer: None,
            model: Some(Model {
                _table: Buf::new(&self.0.device, self.0.table),
                cache: None.into(),
            }),
            cache: self.0.cache,
            table: self.0.table,
            counted: self.0.counted,
            amsgrad: self.0.amsgrad,
            books: self.0.books,
            updates: 0,
            maximum: None,
        })
    }
}

struct Trainer {
    device: Arc<Device>,
    _params: Buf,
    optimizer: Option<Buf>,
    /// The training model: its table and the cache its forward keeps.
    model: Option<Model>,
    cache: u64,
    table: u64,
    counted: Option<u64>,
    amsgrad: bool,
    books: u64,
    updates: usize,
    maximum: Option<Buf>,
}

struct Model {
    _table: Buf,
    cache: std::cell::RefCell<Option<Buf>>,
}

impl Train for Trainer {
    type Batch = Buf;
    type Forward<'t> = Buf;
    type Grads = Buf;
    type Inference = Buf;
    type Prediction = Buf;
    fn param_elems(&self) -> u64 {
        PARAMS / 4
    }
    fn batch(&self) -> Result<Buf> {
        Ok(Buf::new(&self.device, 64))
    }
    fn forward(&self, _: &Buf) -> Result<Buf> {
        if !self.device.workspace.swap(true, Ordering::SeqCst) {
            std::mem::forget(Buf::new(&self.device, WORKSPACE));
        }
        if let Some(m) = &self.model {
            *m.cache.borrow_mut() = None;
            *m.cache.borrow_mut() = Some(Buf::new(&self.device, self.cache));
        }
        Ok(Buf::new(&self.device, 256))
    }
    fn loss_value(&self, _: &Buf) -> Result<f64> {
        Ok(1.0)
    }
    fn list_vars(&self) {}
    fn backward(&self, _: Buf, _: &Buf) -> Result<Buf> {
        Ok(Buf::new(&self.device, PARAMS))
    }
    fn prune(&self, _: &mut Buf) -> Result<()> {
        Ok(())
    }
    fn update(&mut self, _: &Buf) -> Result<()> {
        if self.optimizer.is_none() {
            self.optimizer = Some(Buf::new(&self.device, 2 * PARAMS + self.books));
        }
        self.updates += 1;
        if self.amsgrad && self.updates == 2 {
            self.maximum = Some(Buf::new(&self.device, PARAMS));
        }
        Ok(())
    }
    fn after_step(&mut self) -> Result<()> {
        Ok(())
    }
    fn eval_loss(&self, _: &Buf) -> Result<f64> {
        Ok(1.0)
    }
    fn drop_optimizer(&mut self) {
        self.optimizer = None;
        self.maximum = None;
    }
    fn optimizer_bytes(&self) -> Option<u64> {
        self.counted
    }
    fn clear_state(&mut self) -> Result<bool> {
        if let Some(m) = &self.model {
            *m.cache.borrow_mut() = None;
        }
        Ok(self.cache > 0)
    }
    fn drop_training_model(&mut self) {
        self.model = None;
    }
    fn stand_in_optimizer<'t>(&'t self, _: &'t Buf, elements: usize) -> Result<Option<Box<dyn StandInOptimizer + 't>>> {
        Ok((self.books > 0).then(|| {
            Box::new(StandIn {
                device: self.device.clone(),
                bytes: self.books + 2 * 4 * elements as u64,
                made: None,
            }) as Box<dyn StandInOptimizer>
        }))
    }
    fn inference_model(&self) -> Result<Buf> {
        // Its own table, as a second model built over the weights makes.
        Ok(Buf::new(&self.device, self.table))
    }
    fn predict(&self, _: &Buf, _: &Buf) -> Result<Buf> {
        Ok(Buf::new(&self.device, 32))
    }
    fn leak(&self, _: &Buf) -> Result<()> {
        Ok(())
    }
}

/// The toy optimizer over stand-ins: its bookkeeping, and two moments
/// of the stand-ins' f32 elements.
struct StandIn {
    device: Arc<Device>,
    bytes: u64,
    made: Option<Buf>,
}

impl StandInOptimizer for StandIn {
    fn make(&mut self) -> Result<()> {
        self.made = Some(Buf::new(&self.device, self.bytes));
        Ok(())
    }
}

impl Session for Toy {
    type Params<'s> = Params<'s>;
    type Trainer<'s> = Trainer;
    fn analytic(&self) -> Analytic {
        Analytic {
            param_bytes: PARAMS,
            frozen_elems: 0,
        }
    }
    fn params(&self) -> Params<'_> {
        Params(self)
    }
}

fn run_toy(failing_builds: usize, fail: bool) -> (Measurement, Arc<NoPoolProbe>) {
    let device = Arc::new(Device::default());
    let probe = Arc::new(NoPoolProbe::new(&device));
    probe.fail.store(fail, Ordering::SeqCst);
    let toy = Toy {
        device,
        failing_builds: Cell::new(failing_builds),
        builds: Cell::new(0),
        table: 0,
        cache: 0,
        counted: None,
        amsgrad: false,
        books: 0,
    };
    let recorder = Recorder::new(probe.clone());
    let m = profile(&toy, None, Timing::default(), &recorder, &mut |_, _| {});
    (m, probe)
}

#[test]
fn a_warm_up_settles_the_source_before_the_baseline_and_figures_are_nvmls() {
    let (m, probe) = run_toy(0, false);
    assert_eq!(m.failure, None);
    assert_eq!(m.memory_source, Some(MemorySource::NvmlProcess));
    // Told after the warm-up; the build's call then changes nothing.
    assert_eq!(probe.told.load(Ordering::SeqCst), 2);
    // Read from NVML from the baseline on: the parameters' bytes, not a silent 0.
    assert_eq!(m.values[&Metric::Params], PARAMS as f64);
    assert_eq!(m.values[&Metric::Optimizer], (2 * PARAMS) as f64);
    assert_eq!(m.values[&Metric::Activations], 256.0);
    // A model that keeps nothing has no such figure.
    assert!(!m.values.contains_key(&Metric::ModelState));
}

#[test]
fn the_warm_up_runs_on_its_own_session_and_every_measured_phase_on_the_profiles() {
    let device = Arc::new(Device::default());
    let probe = Arc::new(NoPoolProbe::new(&device));
    let toy = |device: &Arc<Device>| Toy {
        device: device.clone(),
        failing_builds: Cell::new(0),
        builds: Cell::new(0),
        table: 0,
        cache: 0,
        counted: None,
        amsgrad: false,
        books: 0,
    };
    // The adapter's smaller warm-up (`Framework::warm_up_batch`) on the same device.
    let (measured, warm) = (toy(&device), toy(&device));
    let m = profile(
        &measured,
        Some(&warm),
        Timing::default(),
        &Recorder::new(probe),
        &mut |_, _| {},
    );
    assert_eq!(m.failure, None);
    assert_eq!((warm.builds.get(), measured.builds.get()), (1, 1));
    // The workspace the warm-up's forward made stays out of every figure.
    assert_eq!(m.values[&Metric::Activations], 256.0);
    assert_eq!(m.values[&Metric::Params], PARAMS as f64);
}

#[test]
fn a_failed_warm_up_settles_the_source_inside_the_build_span() {
    let (m, probe) = run_toy(1, false);
    assert!(m.warmup_error.is_some());
    assert_eq!(m.memory_source, Some(MemorySource::NvmlProcess));
    assert_eq!(probe.told.load(Ordering::SeqCst), 1);
    // The span began on the empty pool and ended on NVML, whose figures
    // count from the same zero: the parameters, never a silent 0.
    assert_eq!(m.values[&Metric::Params], PARAMS as f64);
    // The workspace the first forward made is in the activations' figure.
    assert_eq!(m.values[&Metric::Activations], (256 + WORKSPACE) as f64);
}

#[test]
fn a_probe_that_cannot_measure_fails_the_profile_with_its_hint() {
    let (m, _) = run_toy(0, true);
    let failure = m.failure.expect("the profile must fail");
    assert_eq!(failure.phase, Phase::Warmup);
    assert_eq!(
        failure.reason,
        "no byte figure can be measured (hint: check `nvidia-smi`)"
    );
    assert!(!m.values.contains_key(&Metric::Params));
}

#[test]
fn the_cpu_probe_reports_its_allocator() {
    struct Counting;
    impl MemoryProbe for Counting {
        fn backend(&self) -> &'static str {
            "cpu"
        }
        fn live(&self) -> u64 {
            0
        }
        fn peak(&self) -> u64 {
            0
        }
        fn reset_peak(&self) {}
    }
    let toy = Toy {
        device: Arc::new(Device::default()),
        failing_builds: Cell::new(0),
        builds: Cell::new(0),
        table: 0,
        cache: 0,
        counted: None,
        amsgrad: false,
        books: 0,
    };
    let m = profile(
        &toy,
        None,
        Timing::default(),
        &Recorder::new(Arc::new(Counting)),
        &mut |_, _| {},
    );
    assert_eq!(m.memory_source, Some(MemorySource::Allocator));
}

#[test]
fn a_cache_the_model_keeps_is_model_state_and_inference_counts_its_own_table_once() {
    const TABLE: u64 = 512;
    const CACHE: u64 = 768;
    let device = Arc::new(Device::default());
    let probe = Arc::new(NoPoolProbe::new(&device));
    let toy = Toy {
        device,
        failing_builds: Cell::new(0),
        builds: Cell::new(0),
        table: TABLE,
        cache: CACHE,
        counted: None,
        amsgrad: false,
        books: 0,
    };
    let m = profile(&toy, None, Timing::default(), &Recorder::new(probe), &mut |_, _| {});
    assert_eq!(m.failure, None);
    // The optimizer's two moments, not the cache the forward left full.
    assert_eq!(m.values[&Metric::Optimizer], (2 * PARAMS) as f64);
    assert_eq!(m.values[&Metric::ModelState], CACHE as f64);
    // Parameters, the batch, the inference model's table and one
    // prediction: the training model's table and cache are gone.
    assert_eq!(m.values[&Metric::InferencePeak], (PARAMS + 64 + TABLE + 32) as f64);
}

/// AMSGrad's running maximum starts as the second moment itself (one
/// buffer at the first step) and parts from it later: the live bytes
/// after the first step say two moments, the state holds three.
#[test]
fn the_optimizer_state_the_adapter_counts_is_the_figure_not_the_first_steps_live_bytes() {
    let m = toy_with(false, Some(3 * PARAMS), 0);
    assert_eq!(m.values[&Metric::Optimizer], (3 * PARAMS) as f64);
}

fn toy_with(amsgrad: bool, counted: Option<u64>, books: u64) -> Measurement {
    let device = Arc::new(Device::default());
    let probe = Arc::new(NoPoolProbe::new(&device));
    let toy = Toy {
        device,
        failing_builds: Cell::new(0),
        builds: Cell::new(0),
        table: 0,
        cache: 0,
        counted,
        amsgrad,
        books,
    };
    let m = profile(&toy, None, Timing::default(), &Recorder::new(probe), &mut |_, _| {});
    assert_eq!(m.failure, None);
    m
}

/// AMSGrad's third buffer parts from the second moment at the second
/// step: the training peak is read once it exists (one buffer of the
/// parameters' size above the same model's with Adam), and its parting
/// is not `growth`.
#[test]
fn the_training_peak_is_read_once_the_optimizer_state_is_complete() {
    let adam = toy_with(false, None, 0);
    let amsgrad = toy_with(true, Some(3 * PARAMS), 0);
    assert_eq!(amsgrad.values[&Metric::Optimizer], (3 * PARAMS) as f64);
    assert_eq!(
        amsgrad.values[&Metric::TrainingPeak] - adam.values[&Metric::TrainingPeak],
        PARAMS as f64
    );
    assert_eq!(amsgrad.values[&Metric::Growth], 0.0);
    // The steps that completed it are trained and their losses kept.
    assert_eq!(amsgrad.losses.len(), adam.losses.len() + 2);
}

/// What the optimizer keeps beside its state's data (its list of the
/// variables, each state tensor's header) is told from what the same
/// optimizer keeps over stand-ins of 1 and 2 elements: subtracted,
/// `optimizer` is the data to the byte.
#[test]
fn the_optimizers_own_bookkeeping_is_not_its_state() {
    let m = toy_with(false, None, 40);
    assert_eq!(m.values[&Metric::Optimizer], (2 * PARAMS) as f64);
}
