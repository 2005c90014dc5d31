//! Spec loading is linear in the number of components: what `gate
//! validate` does (parse + validate, then build each component's workload)
//! for 10k and 100k components, with the time per component (flat when
//! linear). Before duplicate keys were found with a hash set, each key was
//! compared with every earlier one: 40,000 components took 11 s, 80,000
//! 80 s; before the budgets no run can measure were found with a set of
//! referenced names, `gate validate` took 22 s for 50,000 (#28 item 12).
//!   cargo bench --bench spec_load             (10k, 20k, 40k, 100k)
//!   cargo bench --bench spec_load -- --quick  (10k and 100k)

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
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes: &[usize] = if quick {
        &[10_000, 100_000]
    } else {
        &[10_000, 20_000, 40_000, 100_000]
    };
    let registry = gate_builtins::registry();
    println!("{:>10} {:>10} {:>16}", "components", "seconds", "µs per component");
    for &n in sizes {
        let text = spec(n);
        let t = Instant::now();
        let parsed = gate_spec::budget::parse_bytes(Path::new("budgets.yaml"), text.as_bytes());
        let built = parsed
            .as_ref()
            .ok()
            .map(|s| gate::test_support::runner::resolve(s, &registry).is_ok());
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(parsed.map(|s| s.components.len()).ok(), Some(n));
        assert_eq!(built, Some(true), "every workload builds");
        println!("{n:>10} {secs:>10.3} {:>16.2}", secs * 1e6 / n as f64);
    }
}
