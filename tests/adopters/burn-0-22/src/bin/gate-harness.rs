//! The team's gate: `gate check` builds this binary and asks it to measure
//! the workloads registered here.
gate_burn::main!(vision_team::ConvClassifier, vision_team::BnClassifier);
