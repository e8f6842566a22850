"""Step-resampling fine-tunes (paper §6.2, Fig. 5; docs/experiments.md#step-resampling-fine-tunes): the model one
``FinetuneSpec`` starts from and what it trains.

The source's final checkpoint, a DiffEqFormer discretised to N' Euler steps (W(t_k) at t_k = k/N', dt' = 1/N';
docs/paper.md#resampled-model), a GPT baseline at its depth. ``lora`` trains only Levanter LoRA adapters (rank r,
scale α/r with α = 8; + embeddings when ``train_embeddings``) that start at A, B ~ 1e-6·N(0,1) or B = 0, so step 0
is the resampled source; ``full`` trains every parameter."""

from pathlib import Path

from pipeline.config import DIFFEQ_FAMILIES, LLAMA_FAMILIES, FinetuneSpec


def resampled_source(spec: FinetuneSpec, source_dir: Path, vocab_size: int, key):
    """The model fine-tuning starts from: the source's final checkpoint, resampled by ``resample`` as one jitted
    program (run op by op, its hundreds of small operations each compiled on their own: 2.2 s of a tiny job)."""
    import equinox as eqx

    from pipeline.models.checkpoint import load_run_model

    source_spec, model = load_run_model(source_dir, vocab_size)
    if source_spec.run_id != spec.source_run:
        raise ValueError(
            f"{source_dir / 'config.yaml'}: key 'run_id' is {source_spec.run_id!r}; the fine-tune "
            f"{spec.run_id} expects its source run {spec.source_run!r}."
        )
    return eqx.filter_jit(lambda source, resample_key: resample(spec, source, resample_key))(model, key)


def resample(spec: FinetuneSpec, model, key):
    """The source ``model`` discretised to ``euler_steps`` (DiffEqFormer) and, for ``lora``, wrapped with adapters
    initialised by ``lora_init`` on the block projections."""
    import jax
    from levanter.lora import LoraConfig, loraize

    from pipeline.models import GPT_LORA_TARGETS, LLAMA_LORA_TARGETS, discretize, init_lora

    if spec.family in DIFFEQ_FAMILIES:
        model = discretize(model, spec.euler_steps, spec.resampling)
    if spec.method == "lora":
        k_wrap, k_init = jax.random.split(key)
        targets = LLAMA_LORA_TARGETS if spec.family in LLAMA_FAMILIES else GPT_LORA_TARGETS
        model = loraize(model, LoraConfig(r=spec.lora_rank, target_modules=list(targets)), key=k_wrap)
        model = init_lora(model, spec.lora_init, k_init)
    return model


def trainable_filter(spec: FinetuneSpec):
    """Levanter's ``is_trainable`` tree: everything (full), or the LoRA adapters (+ embeddings)."""
    if spec.method == "full":
        return None

    def lora_and_embeddings(model):
        import equinox as eqx
        import jax
        from levanter.lora import lora_trainable_params_filter

        mask = lora_trainable_params_filter(model)
        if spec.train_embeddings:
            embedding_mask = jax.tree_util.tree_map(lambda _: True, model.embeddings)
            mask = eqx.tree_at(lambda tree: tree.embeddings, mask, embedding_mask)
        return mask

    return lora_and_embeddings
