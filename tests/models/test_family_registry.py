"""A family's model config comes from Levanter's ``LmConfig`` registry, by the name ``FAMILY_MODEL_CONFIGS`` gives."""

import draccus
from levanter.models.gpt2 import Gpt2Config
from levanter.models.llama import LlamaConfig
from levanter.models.lm_model import LmConfig

import pipeline.models as pm
from pipeline.config.families import FAMILIES, FAMILY_MODEL_CONFIGS

SHAPE = dict(seq_len=16, hidden_dim=32, num_heads=4, num_layers=2)


def test_every_family_builds_the_config_registered_under_its_name():
    assert set(FAMILY_MODEL_CONFIGS) == set(FAMILIES)
    assert (FAMILY_MODEL_CONFIGS["gpt"], FAMILY_MODEL_CONFIGS["llama"]) == ("gpt2", "llama")  # Levanter's own
    for family in FAMILIES:
        config = pm.build_model_config(family, **SHAPE)
        assert type(config) is LmConfig.get_choice_class(FAMILY_MODEL_CONFIGS[family]), family
        decoded = draccus.decode(LmConfig, {"type": FAMILY_MODEL_CONFIGS[family], **draccus.encode(config)})
        assert decoded == config, family
    assert type(pm.build_model_config("gpt", **SHAPE)) is Gpt2Config
    assert type(pm.build_model_config("llama", **SHAPE)) is LlamaConfig
