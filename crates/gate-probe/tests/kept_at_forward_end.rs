//! A block's kept bytes on the counting allocator: what still lives, of
//! what it made, when the forward (the span) ends, not what it held at its
//! exit. A graph cut after a block (an op that keeps only its own output,
//! as a fused norm does) frees what the block made, and the block then
//! claims none of it; a nested block never exceeds its parent.

use std::sync::Arc;

use gate_probe::{scoped, CountingAlloc, CpuProbe, Recorder};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[test]
fn a_block_keeps_what_still_lives_of_what_it_made_when_the_forward_ends() {
    let rec = Recorder::new(Arc::new(CpuProbe));
    let (kept, span, blocks) = rec.span(true, || {
        // `layer` makes 4,000 B (its intermediate, held past its exit) and
        // its nested `attn` 1,000 B (kept for backward).
        let (attn, intermediate) = scoped("layer", || {
            let attn = scoped("attn", || std::hint::black_box(vec![1u8; 1_000]));
            (attn, std::hint::black_box(vec![2u8; 4_000]))
        });
        // The cut: an op after the block keeps only its own 100 B output.
        drop(intermediate);
        let fused = std::hint::black_box(vec![3u8; 100]);
        (attn, fused)
    });
    let get = |name: &str| blocks.iter().find(|b| b.name == name).expect(name);
    // The forward keeps attn's 1,000 B and the cut's 100 B (and the
    // recorder's own entries for the two blocks).
    assert!(
        span.retained() >= 1_100 && span.retained() < 1_100 + 2_048,
        "{}",
        span.retained()
    );
    assert_eq!(get("layer.attn").retained_bytes, 1_000);
    // At its exit `layer` held 5,000 B; at the forward's end, attn's 1,000.
    assert_eq!(get("layer").retained_bytes, 1_000);
    // It says what it held at its exit, the intermediate the cut freed included.
    let at_exit = gate_probe::scope::exit_bytes("layer");
    assert!(at_exit.is_some_and(|b| b >= 5_000), "{at_exit:?}");
    assert!(get("layer").peak_bytes >= 5_000, "its peak above entry is as before");
    drop(kept);

    // A later span tags afresh: what the first made and frees now counts nowhere.
    let (_, _, again) = rec.span(true, || scoped("layer", || ()));
    assert_eq!(again[0].retained_bytes, 0);
}
