"""Weight-sharing baseline ("Shared parameter" rows of Table 1, after Zhong et al. 2022).

One standard (sequential) GPT-2 block whose weights are reused at each of the ``num_layers`` layers:
x_l = Block(x_{l-1}), l = 1..L, with Levanter's Gpt2Block, Gpt2Embeddings and tied unembedding.
"""

from dataclasses import dataclass

import equinox as eqx
import haliax as hax
import haliax.nn as hnn
import jax.random as jrandom
from haliax import Axis, NamedArray
from haliax.jax_utils import maybe_rng_split
from levanter.layers.attention import AttentionBackend, AttentionMask
from levanter.models.gpt2 import Gpt2Block, Gpt2Config, Gpt2Embeddings
from levanter.models.lm_model import LmConfig
from levanter.utils.activation import ActivationFunctionEnum
from levanter.utils.flop_utils import lm_flops_per_token

from .heads import GptHeadModel


@LmConfig.register_subclass("shared_gpt")
@dataclass(frozen=True)
class SharedGptConfig(LmConfig["SharedGptLMHeadModel"]):
    """Gpt2Config's fields; ``num_layers`` is how many times the single block is applied."""

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

    @property
    def model_type(self) -> type["SharedGptLMHeadModel"]:
        return SharedGptLMHeadModel

    def gpt2(self) -> Gpt2Config:
        """The Gpt2Config of the same shape, for the reused Levanter modules."""
        return Gpt2Config(
            seq_len=self.seq_len,
            hidden_dim=self.hidden_dim,
            num_layers=self.num_layers,
            num_heads=self.num_heads,
            mlp_scale=self.mlp_scale,
            initializer_range=self.initializer_range,
            embed_pdrop=self.embed_pdrop,
            resid_pdrop=self.resid_pdrop,
            attn_pdrop=self.attn_pdrop,
            layer_norm_epsilon=self.layer_norm_epsilon,
            activation_function=self.activation_function,
            upcast_attn=self.upcast_attn,
            gradient_checkpointing=self.gradient_checkpointing,
            use_bias=self.use_bias,
            use_flash_attention=self.use_flash_attention,
            attn_backend=self.attn_backend,
            flash_attention_block_size=self.flash_attention_block_size,
        )

    def flops_per_token(self, vocab_size: int) -> float:
        """The same compute as a GPT-2 of ``num_layers`` layers."""
        return lm_flops_per_token(
            hidden_dim=self.hidden_dim,
            intermediate_dim=self.hidden_dim * self.mlp_scale,
            num_layers=self.num_layers,
            num_kv_heads=self.num_heads,
            num_heads=self.num_heads,
            seq_len=self.seq_len,
            vocab_size=vocab_size,
            glu=False,
        )


class SharedGptTransformer(eqx.Module):
    """x ↦ LN_f(Block^L(x)) with one Gpt2Block; each application is rematerialised."""

    config: SharedGptConfig = eqx.field(static=True)
    block: Gpt2Block
    ln_f: hnn.LayerNorm

    @staticmethod
    def init(config: SharedGptConfig, *, key) -> "SharedGptTransformer":
        gpt2 = config.gpt2()
        ln_f = hnn.LayerNorm.init(config.Embed, eps=config.layer_norm_epsilon, use_bias=config.use_bias)
        return SharedGptTransformer(config, Gpt2Block.init(gpt2, key=key), ln_f)

    def __call__(self, x: NamedArray, attn_mask: AttentionMask | NamedArray, *, key=None) -> NamedArray:
        keys = maybe_rng_split(key, self.config.num_layers) if key is not None else None

        def apply_block(x, block, mask, layer_idx, key):
            return block(x, mask, layer_idx, key=key)

        policy = hax.ScanCheckpointPolicy.from_bool_or_str(self.config.gradient_checkpointing)
        fold = hax.fold(apply_block, self.config.Layers, remat=policy)
        x = fold(x, self.block, attn_mask, hax.arange(self.config.Layers), keys)
        return self.ln_f(x)


class SharedGptLMHeadModel(GptHeadModel):
    """GPT-2 embeddings, the shared-block transformer, and the tied unembedding."""

    transformer: SharedGptTransformer

    @classmethod
    def init(cls, Vocab: Axis, config: SharedGptConfig, *, key) -> "SharedGptLMHeadModel":
        k_t, k_embeddings = jrandom.split(key)
        embeddings = Gpt2Embeddings.init(Vocab, config.gpt2(), key=k_embeddings)
        return cls(SharedGptTransformer.init(config, key=k_t), embeddings)
