//! The two sequence kernels of a Mamba-2 block, written with candle ops that
//! keep their gradients: the causal depthwise conv as shift-and-sum (candle's
//! grouped conv1d runs one kernel per channel), and the chunked SSD scan
//! (docs/models.md §4), with matmuls reshaped to rank ≤ 4.

use candle_core::{Result, Tensor, D};

/// Causal depthwise conv: `x` [B, L, C], `weight` [C, K], `bias` [C] →
/// [B, L, C] with out_t = bias + Σ_j weight[:, j]·x_{t−(K−1)+j} (zeros before t = 0).
pub fn causal_depthwise_conv(x: &Tensor, weight: &Tensor, bias: &Tensor) -> Result<Tensor> {
    let len = x.dim(1)?;
    let k = weight.dim(1)?;
    let padded = x.pad_with_zeros(1, k - 1, 0)?;
    let tap = |j: usize| -> Result<Tensor> {
        let w = weight.narrow(1, j, 1)?.squeeze(1)?;
        padded.narrow(1, j, len)?.broadcast_mul(&w)
    };
    let mut out = tap(0)?;
    for j in 1..k {
        out = out.add(&tap(j)?)?;
    }
    out.broadcast_add(bias)
}

/// The SSD scan with `chunk` steps per block, for one group of B/C shared by
/// all heads:
/// h_t = exp(dt_t·A)·h_{t−1} + dt_t·x_t·B_tᵀ, y_t = C_t·h_t + D·x_t.
/// Shapes: `x` [B, L, H, P], `dt` [B, L, H], `a` [H] (negative), `b` and `c`
/// [B, L, N], `d` [H]; returns y [B, L, H, P]. L need not be a multiple of
/// `chunk`: the tail is padded with dt = 0 (an identity step), which leaves
/// every real output unchanged.
// Steps 1–6 of docs/models.md §4 in one function on purpose: split into
// functions, its intermediates would be freed at other points than where
// they are now, changing the measured bytes.
pub fn ssd(x: &Tensor, dt: &Tensor, a: &Tensor, b: &Tensor, c: &Tensor, d: &Tensor, chunk: usize) -> Result<Tensor> {
    let (bs, len, h, p) = x.dims4()?;
    let n = b.dim(D::Minus1)?;
    let q = chunk.clamp(1, len.max(1));
    let chunks = len.div_ceil(q);
    let pad = chunks * q - len;
    let xdt = pad_time(&x.broadcast_mul(&dt.unsqueeze(3)?)?, pad)?;
    let adt = pad_time(&dt.broadcast_mul(a)?, pad)?;
    let bc = pad_time(b, pad)?.reshape((bs, chunks, q, n))?;
    let cc = pad_time(c, pad)?.reshape((bs, chunks, q, n))?;

    // 1. Cumulative decay within each chunk: acs [B, c, H, Q].
    let acs = adt
        .reshape((bs, chunks, q, h))?
        .transpose(2, 3)?
        .contiguous()?
        .cumsum(3)?;

    // 2. Diagonal blocks: Y_diag = (L ⊙ C·Bᵀ)·X with L_ij = exp(acs_i − acs_j), j ≤ i.
    let causal = causal_log_mask(q, x)?;
    let segments = acs.unsqueeze(4)?.broadcast_sub(&acs.unsqueeze(3)?)?;
    let lmat = segments.broadcast_add(&causal)?.exp()?;
    let cb = cc.matmul(&bc.transpose(2, 3)?)?; // [B, c, Q, Q], shared by the heads
    let gates = lmat.broadcast_mul(&cb.unsqueeze(2)?)?.reshape((bs * chunks, h, q, q))?;
    let xh = xdt
        .reshape((bs, chunks, q, h, p))?
        .permute((0, 1, 3, 2, 4))?
        .contiguous()?; // [B, c, H, Q, P]
    let y_diag = gates
        .matmul(&xh.reshape((bs * chunks, h, q, p))?)?
        .reshape((bs, chunks, h, q, p))?;

    // 3. Each chunk's own contribution to the state at its end: [B, c, H, P·N].
    let acs_last = acs.narrow(3, q - 1, 1)?; // [B, c, H, 1]
    let to_end = acs_last.broadcast_sub(&acs)?.exp()?;
    let weighted = xh.broadcast_mul(&to_end.unsqueeze(4)?)?; // [B, c, H, Q, P]
    let chunk_states = weighted
        .transpose(3, 4)?
        .reshape((bs, chunks, h * p, q))?
        .matmul(&bc)?
        .reshape((bs, chunks, h, p * n))?;

    // 4. States entering each chunk: s₀ = 0, s_{z+1} = exp(acs_last,z)·s_z + S_z.
    let chunk_decay = acs_last.exp()?; // [B, c, H, 1]
    let mut entering = Vec::with_capacity(chunks);
    entering.push(Tensor::zeros((bs, h, p * n), x.dtype(), x.device())?);
    if chunks > 1 {
        let mut state = chunk_states.narrow(1, 0, 1)?.squeeze(1)?;
        for z in 1..chunks {
            entering.push(state.clone());
            if z + 1 < chunks {
                let decay = chunk_decay.narrow(1, z, 1)?.squeeze(1)?;
                state = state
                    .broadcast_mul(&decay)?
                    .add(&chunk_states.narrow(1, z, 1)?.squeeze(1)?)?;
            }
        }
    }
    let entering = Tensor::stack(&entering, 1)?.reshape((bs, chunks, h * p, n))?;

    // 5. Off-diagonal part: Y_off = exp(acs)·(C·s_zᵀ), laid out [B, c, Q, H, P].
    let decay_in = acs.exp()?.transpose(2, 3)?.unsqueeze(4)?; // [B, c, Q, H, 1]
    let y_off = cc
        .matmul(&entering.transpose(2, 3)?)?
        .reshape((bs, chunks, q, h, p))?
        .broadcast_mul(&decay_in)?;

    // 6. Y = Y_diag + Y_off, back to [B, L, H, P], plus the skip D·x.
    let y = y_diag
        .permute((0, 1, 3, 2, 4))?
        .add(&y_off)?
        .reshape((bs, chunks * q, h, p))?
        .narrow(1, 0, len)?;
    y.add(&x.broadcast_mul(&d.reshape((h, 1))?)?)
}

/// `t` [B, L, ...] with `pad` zero steps after its last (itself when none).
fn pad_time(t: &Tensor, pad: usize) -> Result<Tensor> {
    if pad == 0 {
        Ok(t.clone())
    } else {
        t.pad_with_zeros(1, 0, pad)
    }
}

/// [Q, Q]: 0 where j ≤ i, −∞ above the diagonal, so exp() zeroes the future.
fn causal_log_mask(q: usize, like: &Tensor) -> Result<Tensor> {
    let values: Vec<f32> = (0..q * q)
        .map(|ij| if ij % q > ij / q { f32::NEG_INFINITY } else { 0.0 })
        .collect();
    Tensor::from_vec(values, (q, q), like.device())?.to_dtype(like.dtype())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;
    use gate::Rng;

    /// The recurrence, one step at a time, in f64 on the host.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        x: &[f32],
        dt: &[f32],
        a: &[f32],
        b: &[f32],
        c: &[f32],
        d: &[f32],
        (bs, len, h, p, n): (usize, usize, usize, usize, usize),
    ) -> Vec<f64> {
        let mut y = vec![0.0; bs * len * h * p];
        for bi in 0..bs {
            let mut state = vec![0.0f64; h * p * n];
            for t in 0..len {
                let bt = &b[(bi * len + t) * n..][..n];
                let ct = &c[(bi * len + t) * n..][..n];
                for hi in 0..h {
                    let dti = dt[(bi * len + t) * h + hi] as f64;
                    let decay = (dti * a[hi] as f64).exp();
                    for pi in 0..p {
                        let xi = x[((bi * len + t) * h + hi) * p + pi] as f64;
                        let s = &mut state[(hi * p + pi) * n..][..n];
                        let mut out = d[hi] as f64 * xi;
                        for ni in 0..n {
                            s[ni] = decay * s[ni] + dti * xi * bt[ni] as f64;
                            out += ct[ni] as f64 * s[ni];
                        }
                        y[((bi * len + t) * h + hi) * p + pi] = out;
                    }
                }
            }
        }
        y
    }

    #[test]
    fn chunked_scan_equals_the_recurrence() -> Result<()> {
        let dev = Device::Cpu;
        let (bs, h, p, n) = (2, 3, 4, 5);
        for &(len, chunk) in &[(16, 4), (16, 8), (16, 16), (13, 4), (21, 8), (7, 16), (9, 1)] {
            let mut rng = Rng::new(len as u64 * 31 + chunk as u64);
            let x = rng.normal_vec(bs * len * h * p, 0.0, 1.0);
            // dt as the block makes it (softplus range), A in the init range [−16, −1].
            let dt = rng.uniform_vec(bs * len * h, 0.001, 0.3);
            let a: Vec<f32> = rng.uniform_vec(h, 1.0, 16.0).iter().map(|v| -v).collect();
            let b = rng.normal_vec(bs * len * n, 0.0, 1.0);
            let c = rng.normal_vec(bs * len * n, 0.0, 1.0);
            let d = rng.normal_vec(h, 1.0, 0.5);
            let want = reference(&x, &dt, &a, &b, &c, &d, (bs, len, h, p, n));
            let got = ssd(
                &Tensor::from_vec(x, (bs, len, h, p), &dev)?,
                &Tensor::from_vec(dt, (bs, len, h), &dev)?,
                &Tensor::from_vec(a, h, &dev)?,
                &Tensor::from_vec(b, (bs, len, n), &dev)?,
                &Tensor::from_vec(c, (bs, len, n), &dev)?,
                &Tensor::from_vec(d, h, &dev)?,
                chunk,
            )?;
            assert_eq!(got.dims(), &[bs, len, h, p]);
            let got = got.flatten_all()?.to_vec1::<f32>()?;
            let err = got
                .iter()
                .zip(&want)
                .map(|(g, w)| (*g as f64 - w).abs())
                .fold(0.0, f64::max);
            eprintln!("L={len} Q={chunk}: max abs error {err:e}");
            assert!(err < 1e-4, "L={len} Q={chunk}: max abs error {err}");
        }
        Ok(())
    }

    #[test]
    fn shift_and_sum_conv_is_causal_and_matches_a_loop() -> Result<()> {
        let dev = Device::Cpu;
        let (bs, len, ch, k) = (2, 6, 3, 4);
        let mut rng = Rng::new(5);
        let x = rng.normal_vec(bs * len * ch, 0.0, 1.0);
        let w = rng.normal_vec(ch * k, 0.0, 1.0);
        let bias = rng.normal_vec(ch, 0.0, 1.0);
        let got = causal_depthwise_conv(
            &Tensor::from_vec(x.clone(), (bs, len, ch), &dev)?,
            &Tensor::from_vec(w.clone(), (ch, k), &dev)?,
            &Tensor::from_vec(bias.clone(), ch, &dev)?,
        )?
        .flatten_all()?
        .to_vec1::<f32>()?;
        for bi in 0..bs {
            for t in 0..len {
                for ci in 0..ch {
                    let mut want = bias[ci];
                    for j in 0..k {
                        if let Some(src) = (t + j).checked_sub(k - 1) {
                            want += w[ci * k + j] * x[(bi * len + src) * ch + ci];
                        }
                    }
                    let g = got[(bi * len + t) * ch + ci];
                    assert!((g - want).abs() < 1e-5, "b{bi} t{t} c{ci}: {g} vs {want}");
                }
            }
        }
        Ok(())
    }
}
