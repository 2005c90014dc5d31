//! The counting allocator leaves compute scratch out of the live and peak
//! figures: allocations aligned to 128 bytes or more, which is how candle's
//! CPU matmul (`gemm`) allocates its cache-sized packing buffers. Tensors
//! (plain `Vec`s) are counted.

use std::alloc::{alloc, dealloc, Layout};

use gate_probe::alloc::{scratch_live, SCRATCH_ALIGN};
use gate_probe::{CpuProbe, MemoryProbe};

#[global_allocator]
static ALLOC: gate::CountingAlloc = gate::CountingAlloc;

#[test]
fn scratch_is_counted_apart_and_tensors_are_counted() {
    let probe = CpuProbe;
    let size = 3 << 20;
    let (live, scratch) = (probe.live(), scratch_live());
    let layout = Layout::from_size_align(size, SCRATCH_ALIGN).unwrap();
    // SAFETY: a non-zero-size layout, as `alloc` requires.
    let p = unsafe { alloc(layout) };
    assert!(!p.is_null());
    // Other threads of the test harness may allocate meanwhile, but never 3 MiB.
    assert!(probe.live() < live + (1 << 20), "scratch is not live bytes");
    assert_eq!(scratch_live(), scratch + size as u64);
    // SAFETY: `p` came from `alloc` with this layout and is freed once.
    unsafe { dealloc(p, layout) };
    assert_eq!(scratch_live(), scratch);

    let v: Vec<f32> = Vec::with_capacity(size / 4);
    assert!(probe.live() >= live + size as u64, "a tensor's buffer is counted");
    drop(std::hint::black_box(v));
}
