//! Spec loading is linear in the number of components: parse + validate of
//! 10k, 20k, 40k and 80k components, with the time per component (flat when
//! linear). Before duplicate keys were found with a hash set, each key was
//! compared with every earlier one: 40,000 components took 11 s, 80,000 80 s.
//!   cargo bench --bench spec_load

use std::path::Path;
use std::time::Instant;

fn spec(n: usize) -> String {
    let mut s = String::from("version: 1\ndevice:\n  name: card\n  capacity: 4 GiB\n  reserve: 300 MiB\ncomponents:\n");
    for i in 0..n {
        s.push_str(&format!(
            "  m{i}:\n    workload: mlp\n    budgets:\n      params: < 1 MiB\n"
        ));
    }
    s
}

fn main() {
    println!("{:>10} {:>10} {:>16}", "components", "seconds", "µs per component");
    for n in [10_000, 20_000, 40_000, 80_000] {
        let text = spec(n);
        let t = Instant::now();
        let parsed = gate::budget::parse_bytes(Path::new("budgets.yaml"), text.as_bytes());
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(parsed.map(|s| s.components.len()).ok(), Some(n));
        println!("{n:>10} {secs:>10.3} {:>16.2}", secs * 1e6 / n as f64);
    }
}
