//! Dropout masks drawn on the GPU. On the CPU a mask is drawn element by
//! element from the step's seeded generator; on CUDA that meant drawing
//! tens of millions of numbers on the host and copying them over every
//! step (the original TFT's encoder selection network: 31 M per step; on the
//! H200 the plain step went from 447 to 245 ms without them), and a
//! checkpointed block drew them all again in its recompute. Here one seed is
//! taken from the step and cuRAND's Philox generator fills the mask on the
//! device: the same seed gives the same mask, which is all a recompute needs.

use std::sync::Mutex;

use candle_core::cuda_backend::cudarc::curand::{result, sys};
use candle_core::cuda_backend::cudarc::driver::{sys as driver, DevicePtrMut};
use candle_core::{CpuStorage, CudaStorage, CustomOp1, Layout, Result, Shape, Tensor};

/// One Philox generator for the process, bound to the stream it last ran on.
struct Generator {
    handle: sys::curandGenerator_t,
    stream: driver::CUstream,
}

// SAFETY: the handle is only used under the mutex below.
unsafe impl Send for Generator {}

static GENERATOR: Mutex<Option<Generator>> = Mutex::new(None);

/// Uniform values in (0, 1], one per element of its argument (which gives
/// only the shape and the device), from `seed`.
struct Uniform {
    seed: u64,
}

impl CustomOp1 for Uniform {
    fn name(&self) -> &'static str {
        "gate-dropout-uniform"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> Result<(CpuStorage, Shape)> {
        candle_core::bail!("device-side dropout masks are drawn on CUDA only")
    }

    fn cuda_fwd(&self, storage: &CudaStorage, layout: &Layout) -> Result<(CudaStorage, Shape)> {
        let dev = storage.device.clone();
        let n = layout.shape().elem_count();
        let stream = dev.cuda_stream();
        // SAFETY: every element is written by cuRAND below before anyone reads it.
        let mut out = unsafe { dev.alloc::<f32>(n)? };
        let mut guard = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
        let curand = |e: result::CurandError| candle_core::Error::Msg(format!("cuRAND: {e:?}"));
        if guard.as_ref().is_none_or(|g| g.stream != stream.cu_stream()) {
            let handle =
                result::create_generator_kind(sys::curandRngType_t::CURAND_RNG_PSEUDO_PHILOX4_32_10).map_err(curand)?;
            // SAFETY: a live generator and candle's live stream.
            unsafe { result::set_stream(handle, stream.cu_stream() as _) }.map_err(curand)?;
            *guard = Some(Generator {
                handle,
                stream: stream.cu_stream(),
            });
        }
        let handle = guard.as_ref().map(|g| g.handle).expect("set above");
        let (ptr, written) = out.device_ptr_mut(&stream);
        // SAFETY: the generator is live, `ptr` holds `n` f32 values, and the
        // fill is queued on candle's stream, ahead of any reader.
        unsafe {
            result::set_seed(handle, self.seed).map_err(curand)?;
            result::set_offset(handle, 0).map_err(curand)?;
            result::generate::uniform_f32(handle, ptr as *mut f32, n).map_err(curand)?;
        }
        drop(written);
        Ok((CudaStorage::wrap_cuda_slice(out, dev), layout.shape().clone()))
    }
}

/// The inverted-dropout mask for `x` (its shape, dtype and device): each
/// element `scale` with probability `1 - p`, else 0, drawn on the device
/// from `seed`.
pub(super) fn mask(x: &Tensor, p: f64, scale: f32, seed: u64) -> Result<Tensor> {
    let uniform = x.apply_op1_no_bwd(&Uniform { seed })?;
    // cuRAND draws from (0, 1]: drop below p, keep the rest (probability 1 - p).
    let keep = uniform.ge(p)?;
    drop(uniform);
    let kept = keep.to_dtype(x.dtype())?;
    drop(keep);
    kept.affine(scale as f64, 0.0)
}
