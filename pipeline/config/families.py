"""The model families a preset can train (``pretrain.<group>.families``): their names, groups and display labels.

The one list the config, the models, the reports and the schema test read; the schema's ``family`` enum
(``pipeline/config/schema.yaml``) must name the same families.
"""

FAMILY_LABELS = {
    "gpt": "GPT",
    "shared": "Shared parameter",
    "shared_ode": "Shared ODE field",
    "diffeq": "DiffEqFormer",
    "llama": "Llama",
    "diffeq_llama": "DiffEqFormer (Llama)",
}
"""Every family and its label in tables and figures, in the order of the paper's tables."""
FAMILIES = tuple(FAMILY_LABELS)
FAMILY_MODEL_CONFIGS = {
    "gpt": "gpt2",
    "shared": "shared_gpt",
    "shared_ode": "shared_ode_gpt",
    "diffeq": "diffeq_gpt",
    "llama": "llama",
    "diffeq_llama": "diffeq_llama",
}
"""Every family's model config, by its name in Levanter's ``LmConfig`` registry (``pipeline.models`` registers ours)."""
GPT_FAMILIES = ("gpt", "diffeq", "shared", "shared_ode")
"""GPT-2-shaped: learned positions, LayerNorm, GELU MLP sized by ``mlp_scale``, dropout."""
LLAMA_FAMILIES = ("llama", "diffeq_llama")
DIFFEQ_FAMILIES = ("diffeq", "diffeq_llama")
BASELINE_FAMILIES = ("gpt", "llama")
SHARED_FAMILIES = ("shared", "shared_ode")
"""The weight-sharing baselines (docs/paper.md#weight-sharing): a reused sequential block and an ODE-style shared
field."""
GPT2_VOCAB = 50257
LLAMA_VOCAB = 32000
"""Vocabularies of the pretrained tokenizers of the paper's GPT (``gpt2``) and Llama (Llama-2's) runs, known here so
that sizing a run never loads a tokenizer."""
