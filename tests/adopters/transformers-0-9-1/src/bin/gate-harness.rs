//! This crate's harness: budgets.yaml names it under `harness:`, and the
//! installed `gate check` builds and runs it.

gate::main!(
    gate::Lm<transformers_team_0_9_1::llama::LlamaLm>,
    transformers_team_0_9_1::llama_gen::LlamaGen,
    transformers_team_0_9_1::bert::BertMlm,
    transformers_team_0_9_1::t5::T5Lm,
    transformers_team_0_9_1::mamba::MambaLm
);
