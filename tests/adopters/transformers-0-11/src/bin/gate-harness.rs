//! This crate's harness: budgets.yaml names it under `harness:`, and the
//! installed `gate check` builds and runs it.

gate::main!(
    gate::Lm<transformers_team::llama::LlamaLm>,
    transformers_team::llama_gen::LlamaGen,
    transformers_team::bert::BertMlm,
    transformers_team::t5::T5Lm,
    transformers_team::mamba::MambaLm,
    gate::Lm<transformers_team::qwen2::Qwen2Lm>,
    gate::Lm<transformers_team::mistral::MistralLm>,
    gate::Lm<transformers_team::mistral::MistralSgd>
);
