//! Variable selection (docs/models.md §1): each real variable is prescaled to
//! `d_c` and goes through its own GRN; a flattened GRN over all prescaled
//! variables (with an optional static context) gives softmax weights over
//! the variables; the output is the weighted sum of the per-variable GRNs.
//!
//! Layout: the V variables are the leading axis, `[V, N, ·]` with N = B·T,
//! so the per-variable GRNs are batched matmuls over contiguous tensors.

use candle_core::{Result, Tensor, Var};
use candle_nn::VarBuilder;

use super::dense::{Detached, Stack};
use super::grn::{Grn, GrnDims};
use gate::scoped;
use gate::Step;

/// Per-variable Linear(1 → d_c), weights `[V, 1, d_c]`. The model shares one
/// prescaler per variable name between the VSNs that see that variable, so a
/// VSN over several groups (the encoder's known and observed reals) keeps
/// the groups' own tensors and concatenates them when it runs: a copy taken
/// once, when the model is built, would never see the optimizer's updates.
#[derive(Debug, Clone)]
pub struct Prescale {
    /// Each group's weight and bias, `[V_i, 1, d_c]`.
    parts: Vec<(Tensor, Tensor)>,
}

impl Prescale {
    /// One prescaler over the groups, in order; each weight and bias `[V_i, d_c]`.
    pub fn new(groups: &[(&Tensor, &Tensor)]) -> Result<Self> {
        let column = |t: &Tensor| -> Result<Tensor> {
            let (v, dc) = t.dims2()?;
            t.reshape((v, 1, dc))
        };
        let parts = groups
            .iter()
            .map(|(w, b)| Ok((column(w)?, column(b)?)))
            .collect::<Result<_>>()?;
        Ok(Prescale { parts })
    }

    /// The weight and bias over all variables, `[V, 1, d_c]`.
    pub fn stacked(&self) -> Result<(Tensor, Tensor)> {
        if let [(w, b)] = self.parts.as_slice() {
            return Ok((w.clone(), b.clone()));
        }
        let weights: Vec<&Tensor> = self.parts.iter().map(|(w, _)| w).collect();
        let biases: Vec<&Tensor> = self.parts.iter().map(|(_, b)| b).collect();
        Ok((Tensor::cat(&weights, 0)?, Tensor::cat(&biases, 0)?))
    }

    /// The same prescaler concatenated once, for a caller that runs it many
    /// times between two optimizer steps (a checkpointed block's chunks).
    pub fn concatenated(&self) -> Result<Self> {
        Ok(Prescale {
            parts: vec![self.stacked()?],
        })
    }

    /// A copy over fresh leaves holding the stacked weight's and bias's
    /// values, and the two leaves: a backward keeps a leaf's gradient, not
    /// an intermediate's such as the stacked tensors.
    pub(super) fn as_leaves(&self) -> Result<(Self, Var, Var)> {
        let (weight, bias) = self.stacked()?;
        let weight = Var::from_tensor(&weight.detach())?;
        let bias = Var::from_tensor(&bias.detach())?;
        let parts = vec![(weight.as_tensor().clone(), bias.as_tensor().clone())];
        Ok((Prescale { parts }, weight, bias))
    }

    /// A copy over detached tensors.
    pub(super) fn detached(&self) -> Self {
        Prescale {
            parts: self.parts.iter().map(|(w, b)| (w.detach(), b.detach())).collect(),
        }
    }

    /// `x` `[N, V]` → `[V, N, d_c]`.
    pub(super) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (n, v) = x.dims2()?;
        let xt = x.t()?.contiguous()?.reshape((v, n, 1))?;
        let (weight, bias) = self.stacked()?;
        xt.broadcast_mul(&weight)?.broadcast_add(&bias)
    }
}

#[derive(Debug, Clone)]
pub struct Vsn {
    pub(super) prescale: Prescale,
    pub(super) vars: usize,
    pub(super) prescale_dim: usize,
    pub(super) hidden: usize,
    pub(super) single: Grn,
    /// None for a single variable (its weight is 1).
    pub(super) flattened: Option<Grn>,
}

impl Vsn {
    /// `context`: width of the static context fed to the flattened GRN (0: none).
    pub fn new(
        vars: usize,
        prescale: Prescale,
        prescale_dim: usize,
        hidden: usize,
        context: usize,
        dropout: f64,
        vb: VarBuilder,
    ) -> Result<Self> {
        let single = Grn::new(
            GrnDims {
                input: prescale_dim,
                hidden: prescale_dim.min(hidden),
                output: hidden,
                context: 0,
            },
            dropout,
            Stack::PerVariable(vars),
            vb.pp("single_grns"),
        )?;
        let flattened = if vars > 1 {
            Some(Grn::new(
                GrnDims {
                    input: vars * prescale_dim,
                    hidden: hidden.min(vars),
                    output: vars,
                    context,
                },
                dropout,
                Stack::One,
                vb.pp("flattened_grn"),
            )?)
        } else {
            None
        };
        Ok(Vsn {
            prescale,
            vars,
            prescale_dim,
            hidden,
            single,
            flattened,
        })
    }

    /// A copy whose prescaler is concatenated once (see [`Prescale::concatenated`]).
    pub(super) fn with_concatenated_prescale(&self) -> Result<Self> {
        Ok(Vsn {
            prescale: self.prescale.concatenated()?,
            ..self.clone()
        })
    }

    /// A copy with detached parameters, whose forward builds no graph.
    pub(super) fn detached(&self) -> Self {
        Vsn {
            prescale: self.prescale.detached(),
            single: self.single.detached(),
            flattened: self.flattened.as_ref().map(Detached::detached),
            ..self.clone()
        }
    }

    /// `x` `[B, T, V]` raw reals, `context` `[B, 1, c]` → `[B, T, hidden]`.
    pub fn forward(&self, x: &Tensor, context: Option<&Tensor>, step: &Step) -> Result<Tensor> {
        let (b, t, v) = x.dims3()?;
        if v != self.vars {
            candle_core::bail!("the selection network expects {} variables, got {v}", self.vars);
        }
        let n = b * t;
        let prescaled = scoped("prescale", || self.prescale.forward(&x.reshape((n, v))?))?;
        let per_variable = scoped("variable_grns", || self.single.forward(&prescaled, None, step))?;
        let Some(flattened) = &self.flattened else {
            return per_variable.reshape((b, t, self.hidden));
        };
        let weights = scoped("flattened_grn", || {
            self.selection(flattened, &prescaled, (b, t), context, step)
        })?;
        scoped("combine", || -> Result<Tensor> {
            let w = weights.reshape((n, v))?.t()?.contiguous()?.reshape((v, n, 1))?;
            per_variable.broadcast_mul(&w)?.sum(0)?.reshape((b, t, self.hidden))
        })
    }

    /// The variables' weights `[B, T, V]` from the prescaled `[V, N, d_c]`.
    fn selection(
        &self,
        flattened: &Grn,
        prescaled: &Tensor,
        (b, t): (usize, usize),
        context: Option<&Tensor>,
        step: &Step,
    ) -> Result<Tensor> {
        // [V, N, d_c] → [B, T, V·d_c], variable-major as the library concatenates.
        let flat = prescaled
            .transpose(0, 1)?
            .contiguous()?
            .reshape((b, t, self.vars * self.prescale_dim))?;
        super::dense::softmax(&flattened.forward(&flat, context, step)?)
    }
}
