//! The checkpointed encoder VSN as one block that runs its own parts
//! (docs/levers.md, "The checkpointed TFT on a GPU"): the flattened GRN
//! once over every position, the per-variable GRNs chunk by chunk.
//!
//! Run chunk by chunk as a row-wise block, each chunk of the selection
//! network copied its prescaled input into the flattened GRN's
//! `[N, V·d_c]` input, ran its first layer over that width, and
//! backpropagated all of it under autograd: about 245 small kernels a chunk
//! in backward, which is what the checkpointed step cost on a GPU. But the
//! prescaler is linear per variable (`flat[n, v·d_c + j] = x[n, v]·w[v, j] +
//! b[v, j]`), so what the flattened GRN reads of its wide input is narrow:
//! its first layer is `x·Aᵀ + W1·b` with `A[o, v] = Σ_j W1[o, v·d_c + j]·w[v, j]`,
//! and its resampling reads two columns of `flat` per output point, each the
//! prescale of one variable. So the whole flattened GRN runs on `[N, V]`-wide
//! tensors, in parts of [`CHUNKS_PER_PART`] chunks' rows (its graph under
//! autograd is ~35 tensors of `[rows, V]`), and its backward is autograd's,
//! once a part. What stays per chunk is the per-variable GRNs, whose
//! backward is written by hand (`taped`): ~65 operations a chunk in backward
//! and ~30 in forward.
//!
//! Dropout: part `p` of the flattened GRN draws its mask as the block's
//! chunk index `chunks + p` (after the last chunk), chunk `k`'s per-variable
//! GRNs as chunk `k`. The forward, the recompute and
//! [`gate::checkpoint::forward_whole`] draw the same masks.

use candle_core::backprop::GradStore;
use candle_core::{DType, Result, Tensor, Var};

use super::taped::TensorGrads;
use super::vsn::Vsn;
use gate::checkpoint::{Block, RowGrads};
use gate::{scoped, Step};

/// Chunks of the per-variable GRNs per part of the flattened GRN, so that
/// a part's backward costs less memory than a chunk's. Measured on the
/// original config (251 variables, hidden 64) with the counting allocator:
/// the per-variable recompute of a chunk of 64 rows peaks 50 MB above the
/// recompute's base (0.78 MB a row); the flattened GRN's graph, its
/// backward and the gradients autograd leaves for its untracked operands,
/// for a part of 512 rows, 79 MB (0.15 MB a row; the whole batch of 1,920
/// rows at once, 150 MB).
const CHUNKS_PER_PART: usize = 4;

/// The encoder VSN over positions: inputs `[N, V]` reals and `[N, c]`
/// context, output `[N, H]`. Its prescaler is concatenated once, so every
/// chunk uses the same tensors (and the gradients computed by hand for them
/// are summed over the chunks).
pub(super) struct EncoderSelection {
    vsn: Vsn,
    /// For the flattened GRN's resampling (`[V·d_c]` → `[V]` points), the
    /// variable each point's lower and upper neighbour belongs to, `[V]`
    /// each. Made with the block, not the model: the plain model keeps no
    /// tensor of the split form.
    neighbour_vars: (Tensor, Tensor),
    /// Positions per chunk of the per-variable GRNs.
    chunk: usize,
}

/// A run of rows: its index among its kind, first row, and count.
type Rows = (usize, usize, usize);

fn runs(rows: usize, size: usize) -> impl Iterator<Item = Rows> {
    (0..rows.div_ceil(size)).map(move |k| (k, k * size, size.min(rows - k * size)))
}

impl EncoderSelection {
    /// The block for `vsn`, or `None` when its form is not the one split
    /// here (a single variable, no resampling in the flattened GRN, or
    /// per-variable GRNs not written by hand): those run as a row-wise block.
    pub(super) fn new(vsn: &Vsn, chunk: usize) -> Result<Option<Self>> {
        let splits = vsn.flattened.as_ref().is_some_and(|f| f.resample.is_some()) && vsn.single.is_taped_form();
        if !splits {
            return Ok(None);
        }
        let (v, dc) = (vsn.vars, vsn.prescale_dim);
        let device = vsn.single.fc1.weight.device();
        let (lower, upper, _) = super::grn::interpolation_points(v * dc, v);
        let variables = |points: Vec<u32>| {
            let of: Vec<u32> = points.iter().map(|&q| q / dc as u32).collect();
            Tensor::new(of, device)
        };
        Ok(Some(EncoderSelection {
            vsn: vsn.with_concatenated_prescale()?,
            neighbour_vars: (variables(lower)?, variables(upper)?),
            chunk: chunk.max(1),
        }))
    }

    /// The per-variable GRNs' chunks.
    fn chunks(&self, rows: usize) -> impl Iterator<Item = Rows> {
        runs(rows, self.chunk)
    }

    /// The flattened GRN's parts; part `p` draws its dropout as chunk
    /// `chunks + p` of the block.
    fn parts(&self, rows: usize) -> impl Iterator<Item = Rows> {
        let after = rows.div_ceil(self.chunk);
        runs(rows, self.chunk * CHUNKS_PER_PART).map(move |(p, start, len)| (after + p, start, len))
    }

    /// The variables' weights `[N, V]` with `vsn` (attached, or detached
    /// for no graph), part by part.
    fn weights(&self, vsn: &Vsn, x: &Tensor, context: &Tensor, step: &Step, seed: u64) -> Result<Tensor> {
        let n = x.dim(0)?;
        let parts = self
            .parts(n)
            .map(|(k, start, len)| {
                vsn.selection_rows(
                    &self.neighbour_vars,
                    &x.narrow(0, start, len)?,
                    Some(&context.narrow(0, start, len)?),
                    &step.chunk(seed, k),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Tensor::cat(&parts, 0)
    }

    /// The block's forward with `vsn` (attached, or detached for no graph).
    fn run(&self, vsn: &Vsn, x: &Tensor, context: &Tensor, step: &Step) -> Result<Tensor> {
        let n = x.dim(0)?;
        let seed = step.fork_seed();
        let weights = scoped("flattened_grn", || self.weights(vsn, x, context, step, seed))?;
        let mut outs = Vec::with_capacity(n.div_ceil(self.chunk));
        for (k, start, len) in self.chunks(n) {
            let out = scoped("variable_grns", || {
                vsn.combine_rows(
                    &x.narrow(0, start, len)?,
                    &weights.narrow(0, start, len)?,
                    &step.chunk(seed, k),
                )
            })?;
            outs.push(out);
        }
        Tensor::cat(&outs, 0)
    }
}

impl EncoderSelection {
    /// A copy of the block's selection network whose flattened GRN reads
    /// leaves, and what it reads, each with the leaf its gradient is read
    /// from: a backward keeps a leaf's gradient, not an intermediate's. The
    /// flattened GRN's parameters are variables (their own leaves), or in
    /// half precision copies built from f32 masters; the prescaler's stacked
    /// weight and bias are built from variables. Their gradients are pushed
    /// up with the rest of the sums.
    fn with_leaves(&self) -> Result<(Vsn, Vec<(Tensor, Tensor)>)> {
        let (prescale, weight_leaf, bias_leaf) = self.vsn.prescale.as_leaves()?;
        let (weight, bias) = self.vsn.prescale.stacked()?;
        let mut read: Vec<(Tensor, Tensor)> = vec![
            (weight, weight_leaf.as_tensor().clone()),
            (bias, bias_leaf.as_tensor().clone()),
        ];
        let flattened = match &self.vsn.flattened {
            Some(f) => Some(f.map_tensors(&mut |t| {
                let leaf = if t.is_variable() {
                    t.clone()
                } else {
                    Var::from_tensor(&t.detach())?.as_tensor().clone()
                };
                read.push((t.clone(), leaf.clone()));
                Ok(leaf)
            })?),
            None => None,
        };
        let vsn = Vsn {
            prescale,
            flattened,
            ..self.vsn.clone()
        };
        Ok((vsn, read))
    }

    /// The flattened GRN's backward for the weights' gradient `dweights`
    /// `[N, V]`, part by part under autograd, each part's graph gone before
    /// the next: a store holding the context's gradient only, and every
    /// other gradient summed by hand (a variable's both in a store and in
    /// the sums would be counted twice).
    fn flattened_backward(
        &self,
        x: &Tensor,
        context: &Tensor,
        dweights: &Tensor,
        step: &Step,
        seed: u64,
    ) -> Result<(GradStore, TensorGrads)> {
        let (vsn, read) = self.with_leaves()?;
        let mut sums: Option<TensorGrads> = None;
        let mut dcontext: Vec<Tensor> = Vec::new();
        for (k, start, len) in self.parts(x.dim(0)?) {
            let rows = |t: &Tensor| t.narrow(0, start, len);
            let store = vsn
                .selection_rows(
                    &self.neighbour_vars,
                    &rows(x)?,
                    Some(&rows(context)?),
                    &step.chunk(seed, k),
                )?
                .mul(&rows(dweights)?)?
                .sum_all()?
                .backward()?;
            let grads = read
                .iter()
                .map(|(of, leaf)| match store.get(leaf) {
                    Some(g) => Ok((of.clone(), g.detach())),
                    None => Ok((of.clone(), of.zeros_like()?)),
                })
                .collect::<Result<TensorGrads>>()?;
            sums = Some(add_grads(sums, grads)?);
            if let Some(g) = store.get(context) {
                dcontext.push(g.narrow(0, start, len)?.detach());
            }
        }
        let mut store = Tensor::zeros((), DType::F32, x.device())?.backward()?;
        if !dcontext.is_empty() {
            store.insert(context, Tensor::cat(&dcontext, 0)?);
        }
        Ok((store, sums.unwrap_or_default()))
    }
}

impl Block for EncoderSelection {
    fn chunk(&self) -> Option<usize> {
        Some(self.chunk)
    }

    fn forward_block(&self, inputs: &[Tensor], step: &Step) -> Result<Tensor> {
        let [x, context] = inputs else {
            candle_core::bail!(
                "the encoder selection takes reals and context, got {} inputs",
                inputs.len()
            );
        };
        self.run(&self.vsn, x, context, step)
    }

    fn forward_block_detached(&self, inputs: &[Tensor], step: &Step) -> Result<Tensor> {
        let [x, context] = inputs else {
            candle_core::bail!(
                "the encoder selection takes reals and context, got {} inputs",
                inputs.len()
            );
        };
        self.run(&self.vsn.detached(), &x.detach(), &context.detach(), step)
    }

    /// The weights with no graph; each chunk's per-variable GRNs recomputed
    /// with their tape and backpropagated by hand (reading the weights),
    /// giving the weights' gradient; then the flattened GRN part by part
    /// under autograd with that gradient, each part's graph gone before the
    /// next. Every gradient but the context's is returned summed by hand;
    /// the context's, in the store.
    fn backward_block(&self, inputs: &[Tensor], step: &Step, grad_out: &Tensor) -> Result<Option<RowGrads>> {
        let [x, context] = inputs else {
            candle_core::bail!(
                "the encoder selection takes reals and context, got {} inputs",
                inputs.len()
            );
        };
        let n = x.dim(0)?;
        let seed = step.fork_seed();
        let weights = self.weights(&self.vsn.detached(), x, &context.detach(), step, seed)?;
        let mut dweights = Vec::with_capacity(n.div_ceil(self.chunk));
        let mut by_chunk: Option<TensorGrads> = None;
        for (k, start, len) in self.chunks(n) {
            let rows = |t: &Tensor| t.narrow(0, start, len);
            let Some((dw, grads)) =
                self.vsn
                    .combine_rows_backward(&rows(x)?, &rows(&weights)?, &step.chunk(seed, k), &rows(grad_out)?)?
            else {
                return Ok(None);
            };
            dweights.push(dw);
            by_chunk = Some(add_grads(by_chunk, grads)?);
        }
        drop(weights);
        let dweights = Tensor::cat(&dweights, 0)?;
        let (store, by_part) = self.flattened_backward(x, context, &dweights, step, seed)?;
        let mut tensors = by_chunk.unwrap_or_default();
        tensors.extend(by_part);
        Ok(Some(RowGrads::new(store, tensors)))
    }
}

/// Each chunk's hand-computed gradients added into the sums so far, in f32
/// (a bf16 sum over many chunks would round at every add). Every chunk
/// gives the same tensors in the same order.
fn add_grads(sums: Option<TensorGrads>, grads: TensorGrads) -> Result<TensorGrads> {
    let f32 = |g: Tensor| g.to_dtype(DType::F32);
    match sums {
        None => grads.into_iter().map(|(of, g)| Ok((of, f32(g)?))).collect(),
        Some(sums) => {
            debug_assert_eq!(sums.len(), grads.len(), "each chunk gives the same gradients");
            sums.into_iter()
                .zip(grads)
                .map(|((of, sum), (_, g))| Ok((of, (sum + f32(g)?)?)))
                .collect()
        }
    }
}

impl Vsn {
    /// The variables' weights `[N, V]` for raw reals `x` `[N, V]` (and the
    /// context `[N, c]`; `neighbour_vars` as [`EncoderSelection`] holds
    /// them), from the flattened GRN run on what it reads of its
    /// prescaled input (module docs): the same function as
    /// [`Vsn::forward`]'s selection, on `[N, V]`-wide tensors. The residual
    /// is bitwise the same (the same ops on the same values); the first
    /// layer sums in another order.
    pub(super) fn selection_rows(
        &self,
        (var_lo, var_hi): &(Tensor, Tensor),
        x: &Tensor,
        context: Option<&Tensor>,
        step: &Step,
    ) -> Result<Tensor> {
        let Some(flattened) = &self.flattened else {
            candle_core::bail!("the selection is split only with several variables");
        };
        let Some(resample) = &flattened.resample else {
            candle_core::bail!("the flattened GRN has no resampling");
        };
        let (v, dc) = (self.vars, self.prescale_dim);
        let (weight, bias) = self.prescale.stacked()?;
        let weight_flat = weight.reshape(v * dc)?;
        let bias_flat = bias.reshape(v * dc)?;
        // Each resampled point's neighbour `flat[:, q]` is x[:, q / d_c]·w_q + b_q,
        // computed as the prescaler computes it.
        let residual = {
            let (w_lo, w_hi) = resample.neighbours(&weight_flat)?;
            let (b_lo, b_hi) = resample.neighbours(&bias_flat)?;
            let lo = x.index_select(var_lo, 1)?.broadcast_mul(&w_lo)?.broadcast_add(&b_lo)?;
            let hi = x.index_select(var_hi, 1)?.broadcast_mul(&w_hi)?.broadcast_add(&b_hi)?;
            resample.forward_between(&lo, &hi)?
        };
        let hidden = {
            let fc1 = &flattened.fc1;
            let (width, flat) = fc1.weight.dims2()?;
            // flat·W1ᵀ = x·Aᵀ + W1·b.
            let a = fc1
                .weight
                .reshape((width, v, dc))?
                .broadcast_mul(&weight.reshape((1, v, dc))?)?
                .sum(2)?;
            let shift = fc1.weight.matmul(&bias_flat.reshape((flat, 1))?)?.reshape(width)?;
            let shift = match &fc1.bias {
                Some(b) => (shift + b)?,
                None => shift,
            };
            let mut h = x.contiguous()?.matmul(&a.t()?)?.broadcast_add(&shift)?;
            if let (Some(layer), Some(ctx)) = (&flattened.context, context) {
                h = h.broadcast_add(&layer.forward(ctx)?)?;
            }
            h = h.elu(1.0)?;
            flattened.fc2.forward(&h)?
        };
        super::dense::softmax(&flattened.gate.forward(hidden, &residual, step)?)
    }

    /// The per-variable GRNs over rows `x` `[n, V]`, combined with the
    /// variables' weights `w` `[n, V]`: `[n, H]`.
    pub(super) fn combine_rows(&self, x: &Tensor, w: &Tensor, step: &Step) -> Result<Tensor> {
        let (n, v) = x.dims2()?;
        let per_variable = self.single.forward(&self.prescale.forward(x)?, None, step)?;
        let w = w.t()?.contiguous()?.reshape((v, n, 1))?;
        per_variable.broadcast_mul(&w)?.sum(0)
    }

    /// The backward of [`Vsn::combine_rows`] for output gradient `dout`
    /// `[n, H]`, written by hand: the weights' gradient `[n, V]`, and the
    /// per-variable GRNs' and the prescaler's gradients (those the prescaler
    /// gets through the flattened GRN come from its own backward). `None`
    /// when the per-variable GRNs are not of the form written by hand.
    pub(super) fn combine_rows_backward(
        &self,
        x: &Tensor,
        w: &Tensor,
        step: &Step,
        dout: &Tensor,
    ) -> Result<Option<(Tensor, TensorGrads)>> {
        let (n, v) = x.dims2()?;
        let x = x.t()?.contiguous()?.reshape((v, n, 1))?;
        let (weight, bias) = self.prescale.stacked()?;
        let prescaled = x.broadcast_mul(&weight.detach())?.broadcast_add(&bias.detach())?;
        let Some((per_variable, tape)) = self.single.forward_taped(&prescaled, step)? else {
            return Ok(None);
        };
        drop(prescaled); // the tape holds it as the GRNs' input, and drops it when read
                         // out = Σ_v w_v ⊙ grn_v: each factor's gradient is the other's product with dout.
        let g = dout.reshape((1, n, self.hidden))?;
        let dweights = per_variable.broadcast_mul(&g)?.sum_keepdim(2)?.reshape((v, n))?.t()?;
        drop(per_variable);
        let w = w.t()?.contiguous()?.reshape((v, n, 1))?;
        let (dprescaled, mut grads) = self.single.backward_taped(tape, w.broadcast_mul(&g)?)?;
        // prescaled = x ⊙ w + b, per variable over the positions.
        grads.push((weight, x.transpose(1, 2)?.matmul(&dprescaled)?));
        grads.push((bias, dprescaled.sum_keepdim(1)?));
        Ok(Some((dweights, grads)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tft::vsn::Prescale;
    use candle_core::Device;
    use gate::checkpoint::{forward_whole, Checkpointed};
    use gate::ParamStore;

    const V: usize = 5;
    const DC: usize = 6;
    const N: usize = 11;

    /// An encoder VSN of the split form (prescale width = hidden width), its
    /// store, reals `[N, V]` and a tracked context `[N, DC]` built from a
    /// variable (as the static encoders' output is).
    fn selection(store: &ParamStore, dropout: f64) -> Result<(Vsn, Tensor, Var)> {
        let dev = Device::Cpu;
        let vb = store.builder(DType::F32, &dev);
        let w = vb.get_with_hints(
            (V, DC),
            "prescale.weight",
            candle_nn::Init::Randn { mean: 0.0, stdev: 1.0 },
        )?;
        let b = vb.get_with_hints(
            (V, DC),
            "prescale.bias",
            candle_nn::Init::Randn { mean: 0.0, stdev: 1.0 },
        )?;
        let vsn = Vsn::new(V, Prescale::new(&[(&w, &b)])?, DC, DC, DC, dropout, vb.pp("vsn"))?;
        let x = Tensor::randn(0f32, 1.0, (N, V), &dev)?;
        let context = Var::from_tensor(&Tensor::randn(0f32, 1.0, (N, DC), &dev)?)?;
        Ok((vsn, x, context))
    }

    #[test]
    fn the_split_selection_computes_the_plain_forward() -> Result<()> {
        let store = ParamStore::new(7);
        let (vsn, x, context) = selection(&store, 0.0)?;
        let want = vsn
            .forward(
                &x.unsqueeze(0)?,
                Some(&context.as_tensor().unsqueeze(0)?),
                &Step::eval(),
            )?
            .squeeze(0)?;
        for chunk in [1, 4, N] {
            let block = EncoderSelection::new(&vsn, chunk)?.expect("the split form");
            let got = forward_whole(&block, &[x.clone(), context.as_tensor().clone()], &Step::eval())?;
            let diff = (&want - got)?.abs()?.max_all()?.to_scalar::<f32>()?;
            assert!(diff < 1e-5, "chunk {chunk}: {diff}");
        }
        Ok(())
    }

    /// The hand-written backward and the one flattened-GRN backward give
    /// autograd's gradients of the same forward, dropout included, for every
    /// parameter and for the tracked context.
    #[test]
    fn the_split_backward_equals_autograd_of_the_same_forward() -> Result<()> {
        for (dropout, chunk) in [(0.0, 4), (0.3, 3), (0.3, N)] {
            let store = ParamStore::new(9);
            let (vsn, x, context) = selection(&store, dropout)?;
            let block = EncoderSelection::new(&vsn, chunk)?.expect("the split form");
            let dout = Tensor::randn(0f32, 1.0, (N, DC), &Device::Cpu)?;
            let inputs = vec![x.clone(), context.as_tensor().clone()];
            let want = forward_whole(&block, &inputs, &Step::train(3))?
                .mul(&dout)?
                .sum_all()?
                .backward()?;

            let ck = Checkpointed::whole(&block, inputs, &Step::train(3))?;
            let mut grads = ck.output().mul(&dout)?.sum_all()?.backward()?;
            let mut vars = store.vars();
            vars.push(context.clone());
            ck.backward_whole(&block, &mut grads, &vars)?;

            let named = store
                .named_vars()
                .into_iter()
                .chain([("context".to_string(), context.clone())]);
            for (name, var) in named {
                let a = want
                    .get(var.as_tensor())
                    .unwrap_or_else(|| panic!("`{name}`: no reference"));
                let b = grads
                    .get(var.as_tensor())
                    .unwrap_or_else(|| panic!("`{name}`: no gradient"));
                let scale = a.abs()?.max_all()?.to_scalar::<f32>()?.max(1e-6);
                let diff = (a - b)?.abs()?.max_all()?.to_scalar::<f32>()?;
                assert!(
                    diff <= 1e-5 * scale,
                    "dropout {dropout}, chunk {chunk}, `{name}`: {diff} of {scale}"
                );
            }
        }
        Ok(())
    }

    #[test]
    fn other_forms_are_not_split() -> Result<()> {
        let store = ParamStore::new(3);
        let vb = store.builder(DType::F32, &Device::Cpu);
        let w = vb.get((V, 4), "w")?;
        // Prescale width 4 against hidden 6: the per-variable GRNs resample.
        let vsn = Vsn::new(V, Prescale::new(&[(&w, &w)])?, 4, DC, DC, 0.1, vb.pp("vsn"))?;
        assert!(EncoderSelection::new(&vsn, 4)?.is_none());
        let w1 = vb.get((1, DC), "w1")?;
        let single = Vsn::new(1, Prescale::new(&[(&w1, &w1)])?, DC, DC, DC, 0.1, vb.pp("single"))?;
        assert!(EncoderSelection::new(&single, 4)?.is_none());
        Ok(())
    }
}
