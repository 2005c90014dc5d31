//! A seeded parameter store for candle's `VarBuilder`. Every parameter is
//! drawn from a generator keyed by (seed, name), honouring candle-nn's
//! `Init` hints, so `candle_nn::linear` and friends work unchanged and a
//! model's weights repeat exactly. The same store hands out a detached view
//! (plain tensors sharing the same storage) for inference with no graph.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Result, Shape, Tensor, Var};
use candle_nn::init::{FanInOut, Init, NormalOrUniform};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::VarBuilder;

use super::rng::Rng;

#[derive(Default)]
struct Inner {
    vars: Vec<(String, Var)>,
    index: HashMap<String, usize>,
}

/// The weights of a model, created on first use by candle-nn's layers
/// through [`ParamStore::builder`] and seeded by name, so the same seed gives
/// the same weights whatever order they are built in. The runner owns one
/// per profile; a workload only sees the `VarBuilder`.
#[derive(Clone)]
pub struct ParamStore {
    seed: u64,
    /// Mixed precision: variables are created in this dtype (f32 master
    /// weights) and handed out cast to the builder's dtype, the cast tracked
    /// so gradients reach the masters in their own dtype.
    master: Option<DType>,
    inner: Arc<Mutex<Inner>>,
}

impl ParamStore {
    /// An empty store whose weights are drawn from `seed`.
    pub fn new(seed: u64) -> Self {
        ParamStore {
            seed,
            master: None,
            inner: Arc::default(),
        }
    }

    /// A store whose variables live in `master` (e.g. f32) whatever dtype
    /// the model computes in. A built model holds casts of the variables
    /// taken at build time: rebuild it after each optimizer step.
    pub fn with_master(seed: u64, master: Option<DType>) -> Self {
        ParamStore {
            master,
            ..ParamStore::new(seed)
        }
    }

    /// The master-weight dtype, when the store keeps masters.
    pub fn master(&self) -> Option<DType> {
        self.master
    }

    /// A builder whose tensors are trainable `Var`s created on first use.
    pub fn builder(&self, dtype: DType, device: &Device) -> VarBuilder<'static> {
        VarBuilder::from_backend(Box::new(self.clone()), dtype, device.clone())
    }

    /// A builder over the same storage with gradient tracking off: for inference.
    pub fn detached(&self, dtype: DType, device: &Device) -> VarBuilder<'static> {
        let map: HashMap<String, Tensor> = self
            .lock()
            .vars
            .iter()
            .map(|(n, v)| (n.clone(), v.as_tensor().detach()))
            .collect();
        VarBuilder::from_tensors(map, dtype, device)
    }

    /// Trainable variables in creation order.
    pub fn vars(&self) -> Vec<Var> {
        self.lock().vars.iter().map(|(_, v)| v.clone()).collect()
    }

    /// Trainable variables in creation order, less those `frozen` names: a
    /// name is frozen when it is listed whole, or under a listed prefix that
    /// ends in `.`.
    pub fn vars_except(&self, frozen: &[String]) -> Vec<Var> {
        let inner = self.lock();
        let trained = |(n, _): &&(String, Var)| !is_frozen(n, frozen);
        // Exactly as long as it needs: the list lives through the profile,
        // and its spare room would be counted in every figure after it.
        let mut out = Vec::with_capacity(inner.vars.iter().filter(trained).count());
        out.extend(inner.vars.iter().filter(trained).map(|(_, v)| v.clone()));
        out
    }

    /// The entries of `frozen` that name no variable of this store.
    pub fn unknown_frozen<'f>(&self, frozen: &'f [String]) -> Vec<&'f str> {
        let inner = self.lock();
        frozen
            .iter()
            .filter(|f| !inner.vars.iter().any(|(n, _)| is_frozen(n, std::slice::from_ref(f))))
            .map(String::as_str)
            .collect()
    }

    /// Which of the trainable variables (less `frozen`) have a gradient in
    /// `grads`, with their bytes; names are kept only for those without.
    pub fn coverage(&self, grads: &GradStore, frozen: &[String]) -> gate_contract::measurement::GradientCoverage {
        let inner = self.lock();
        let mut c = gate_contract::measurement::GradientCoverage::default();
        for (name, var) in &inner.vars {
            if is_frozen(name, frozen) {
                c.frozen += 1;
                continue;
            }
            let bytes = (var.elem_count() * var.dtype().size_in_bytes()) as u64;
            c.tensors += 1;
            c.bytes += bytes;
            if grads.get(var.as_tensor()).is_none() {
                c.without_gradient += 1;
                c.without_gradient_bytes += bytes;
                if c.missing.len() < gate_contract::measurement::GradientCoverage::NAMES_KEPT {
                    c.missing.push(name.clone());
                }
            }
        }
        c
    }

    /// Trainable variables with their names (`encoder.fc0.weight`), in creation order.
    pub fn named_vars(&self) -> Vec<(String, Var)> {
        self.lock().vars.clone()
    }

    /// Number of parameter tensors (variables).
    pub fn tensor_count(&self) -> u64 {
        self.lock().vars.len() as u64
    }

    /// Total number of parameter elements.
    pub fn elem_count(&self) -> u64 {
        self.lock().vars.iter().map(|(_, v)| v.elem_count() as u64).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A poisoned lock only means a panic elsewhere; the data is still consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn create(&self, shape: &Shape, name: &str, init: Init, dtype: DType, dev: &Device) -> Result<Var> {
        let n = shape.elem_count();
        let mut rng = Rng::for_name(self.seed, name);
        let values: Vec<f32> = match init {
            Init::Const(c) => vec![c as f32; n],
            Init::Randn { mean, stdev } => rng.normal_vec(n, mean, stdev),
            Init::Uniform { lo, up } => rng.uniform_vec(n, lo, up),
            Init::Kaiming {
                dist,
                fan,
                non_linearity,
            } => {
                let fan = fan_for(fan, shape);
                let std = non_linearity.gain() / (fan as f64).sqrt();
                match dist {
                    NormalOrUniform::Uniform => {
                        let bound = 3f64.sqrt() * std;
                        rng.uniform_vec(n, -bound, bound)
                    }
                    NormalOrUniform::Normal => rng.normal_vec(n, 0.0, std),
                }
            }
        };
        let t = Tensor::from_vec(values, shape.clone(), dev)?.to_dtype(dtype)?;
        Var::from_tensor(&t)
    }
}

/// Whether parameter `name` is one of `frozen`: named whole, or under a
/// prefix that ends in `.`.
pub(crate) fn is_frozen(name: &str, frozen: &[String]) -> bool {
    frozen
        .iter()
        .any(|f| name == f || (f.ends_with('.') && name.starts_with(f.as_str())))
}

fn fan_for(fan: FanInOut, shape: &Shape) -> usize {
    fan.for_shape(shape).max(1)
}

impl SimpleBackend for ParamStore {
    fn get(&self, s: Shape, name: &str, h: Init, dtype: DType, dev: &Device) -> Result<Tensor> {
        // One lock at a time: a guard held across a second `lock()` deadlocks.
        let existing = {
            let inner = self.lock();
            inner.index.get(name).map(|&i| inner.vars[i].1.as_tensor().clone())
        };
        if let Some(t) = existing {
            if t.shape() != &s {
                candle_core::bail!(
                    "parameter `{name}` was created as {:?} and asked for as {:?}",
                    t.shape(),
                    s
                );
            }
            return t.to_dtype(dtype);
        }
        let var = self.create(&s, name, h, self.master.unwrap_or(dtype), dev)?;
        let t = var.as_tensor().to_dtype(dtype)?;
        let mut inner = self.lock();
        let i = inner.vars.len();
        inner.vars.push((name.to_string(), var));
        inner.index.insert(name.to_string(), i);
        Ok(t)
    }

    // candle 0.9.2 added this to the trait; 0.9.1 does not have it.
    #[cfg(not(feature = "candle-0-9-1"))]
    fn get_unchecked(&self, name: &str, _dtype: DType, _dev: &Device) -> Result<Tensor> {
        let inner = self.lock();
        match inner.index.get(name) {
            Some(&i) => inner.vars[i].1.as_tensor().to_dtype(_dtype),
            None => candle_core::bail!("no parameter named `{name}`"),
        }
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.lock().index.contains_key(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_weights_and_detached_shares_storage() -> Result<()> {
        let dev = Device::Cpu;
        let a = ParamStore::new(5);
        let la = candle_nn::linear(4, 3, a.builder(DType::F32, &dev).pp("fc"))?;
        let b = ParamStore::new(5);
        let lb = candle_nn::linear(4, 3, b.builder(DType::F32, &dev).pp("fc"))?;
        assert_eq!(la.weight().to_vec2::<f32>()?, lb.weight().to_vec2::<f32>()?);
        assert_eq!(a.elem_count(), 15);
        let d = candle_nn::linear(4, 3, a.detached(DType::F32, &dev).pp("fc"))?;
        assert!(!d.weight().is_variable());
        assert!(la.weight().is_variable());
        assert_eq!(d.weight().to_vec2::<f32>()?, la.weight().to_vec2::<f32>()?);
        // A second trainable build shares the first one's variables.
        let again = candle_nn::linear(4, 3, a.builder(DType::F32, &dev).pp("fc"))?;
        assert_eq!(again.weight().id(), la.weight().id());
        Ok(())
    }

    #[test]
    fn master_weights_stay_f32_and_receive_the_gradients() -> Result<()> {
        let dev = Device::Cpu;
        let store = ParamStore::with_master(5, Some(DType::F32));
        let l = candle_nn::linear(4, 3, store.builder(DType::BF16, &dev).pp("fc"))?;
        assert_eq!(l.weight().dtype(), DType::BF16);
        let vars = store.vars();
        assert!(vars.iter().all(|v| v.dtype() == DType::F32));
        let x = Tensor::ones((2, 4), DType::BF16, &dev)?;
        let grads = candle_nn::Module::forward(&l, &x)?.sum_all()?.backward()?;
        for v in &vars {
            assert_eq!(grads.get(v.as_tensor()).expect("a gradient").dtype(), DType::F32);
        }
        // Same weights as a plain f32 store, to bf16 precision.
        let plain = ParamStore::new(5);
        let p = candle_nn::linear(4, 3, plain.builder(DType::F32, &dev).pp("fc"))?;
        let diff = (p.weight() - l.weight().to_dtype(DType::F32)?)?
            .abs()?
            .max_all()?
            .to_scalar::<f32>()?;
        assert!(diff < 1e-2);
        Ok(())
    }
}
