"""The model families a preset can train (``pretrain.<group>.families``), their groups, labels and model configs: the
one list the config, the models and the reports read (the schema's ``family`` enum must name the same families)."""

FAMILY_TABLE = {
    "gpt": ("GPT", "gpt2"),
    "shared": ("Shared parameter", "shared_gpt"),
    "shared_ode": ("Shared ODE field", "shared_ode_gpt"),
    "diffeq": ("DiffEqFormer", "diffeq_gpt"),
    "llama": ("Llama", "llama"),
    "diffeq_llama": ("DiffEqFormer (Llama)", "diffeq_llama"),
}
"""Every family, in the order of the paper's tables: its label in tables and figures, and its model config by its name
in Levanter's ``LmConfig`` registry (``pipeline.models`` registers ours)."""
FAMILIES = tuple(FAMILY_TABLE)
FAMILY_LABELS = {family: label for family, (label, _) in FAMILY_TABLE.items()}
FAMILY_MODEL_CONFIGS = {family: model_config for family, (_, model_config) in FAMILY_TABLE.items()}
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
