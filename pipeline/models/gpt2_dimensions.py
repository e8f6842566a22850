"""The GPT-2 dimensions shared by DiffEqFormer-GPT and the weight-sharing models: ``Gpt2Config``'s fields, the
``Gpt2Config`` for the reused Levanter modules, the final norm and the FLOPs."""

import dataclasses
from dataclasses import dataclass

import haliax.nn as hnn
from haliax import Axis
from levanter.layers.attention import AttentionBackend
from levanter.models.gpt2 import Gpt2Config
from levanter.utils.activation import ActivationFunctionEnum


@dataclass(frozen=True)
class Gpt2Dimensions:
    """Gpt2Config's fields and axes; ``num_layers`` is L, the number of (Euler or shared-block) steps."""

    seq_len: int = 1024
    hidden_dim: int = 768
    num_layers: int = 12
    num_heads: int = 12
    mlp_scale: int = 4
    initializer_range: float = 0.02
    embed_pdrop: float = 0.0
    resid_pdrop: float = 0.0
    attn_pdrop: float = 0.0
    layer_norm_epsilon: float = 1e-5
    activation_function: ActivationFunctionEnum = ActivationFunctionEnum.gelu_new
    upcast_attn: bool = False
    gradient_checkpointing: bool | str = True
    use_bias: bool = True
    use_flash_attention: bool | None = None
    attn_backend: AttentionBackend | None = None
    flash_attention_block_size: int | None = None

    Pos = property(lambda self: Axis(name="position", size=self.seq_len))
    KeyPos = property(lambda self: self.Pos.alias("key_position"))
    Embed = property(lambda self: Axis(name="embed", size=self.hidden_dim))
    Layers = property(lambda self: Axis(name="layers", size=self.num_layers))

    def gpt2(self) -> Gpt2Config:
        """The Gpt2Config of the same dimensions, for the reused Levanter modules (embeddings, attention, MLP,
        block)."""
        return Gpt2Config(**{field.name: getattr(self, field.name) for field in dataclasses.fields(Gpt2Dimensions)})

    def final_norm(self) -> hnn.LayerNorm:
        """The final LayerNorm of the transformer."""
        return hnn.LayerNorm.init(self.Embed, eps=self.layer_norm_epsilon, use_bias=self.use_bias)

    def flops_per_token(self, vocab_size: int) -> float:
        """A GPT-2 forward of L layers: weight sharing computes the same, and DiffEqFormer generates its weights
        once per batch, not per token (App. D.1)."""
        return self.gpt2().flops_per_token(vocab_size)
