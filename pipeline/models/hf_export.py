"""A GPT-2 or Llama baseline in Hugging Face format via Levanter's HF converter, with the run's tokenizer
(docs/experiments.md#downstream-evaluation). The DiffEqFormers and weight sharing have no HF architecture."""

from pathlib import Path

from pipeline.data.files import atomic_directory

EXPORTABLE_FAMILIES = ("gpt", "llama")


def export_hf(model, tokenizer, out_dir: str | Path) -> None:
    """Write ``model`` (``Gpt2LMHeadModel`` or ``LlamaLMHeadModel``) and ``tokenizer`` to ``out_dir`` atomically
    (a temporary sibling renamed onto it). The converter's reference ``config.json`` is the export's own, written
    first, so nothing is fetched from the hub."""
    import jax
    import numpy as np
    from levanter.compat.hf_checkpoints import HFCheckpointConverter

    with atomic_directory(out_dir, overwrite=True) as tmp:
        hf_config = model.config.to_hf_config(model.Vocab.size)
        converter = HFCheckpointConverter(
            type(model.config), reference_checkpoint=str(tmp), HfConfigClass=type(hf_config), tokenizer=tokenizer
        )
        hf_config.architectures = [converter.HFAutoModelClass().__name__]
        hf_config.save_pretrained(tmp)
        with jax.set_mesh(jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "model"))):
            converter.save_pretrained(model, str(tmp), save_reference_code=False)


def export_run_hf(run_dir: str | Path, tokenizer_dir: str | Path, out_dir: str | Path) -> dict:
    """Export a trained ``gpt`` or ``llama`` run's final checkpoint with its tokenizer (``export_hf``); any other
    family is refused with one sentence before its checkpoint is read. Returns {"run_id", "family", "out_dir"}."""
    from levanter.compat.hf_checkpoints import load_tokenizer

    from pipeline.artifacts import read_run_spec
    from pipeline.models.checkpoint import load_run_model

    spec = read_run_spec(run_dir)
    if spec.model.family not in EXPORTABLE_FAMILIES:
        raise ValueError(
            f"{run_dir}: {spec.run_id} is a '{spec.model.family}' run, which has no Hugging Face "
            f"architecture; only the {' and '.join(EXPORTABLE_FAMILIES)} baselines can be exported."
        )
    tokenizer = load_tokenizer(str(tokenizer_dir))
    _, model = load_run_model(run_dir, len(tokenizer))
    export_hf(model, tokenizer, out_dir)
    return {"run_id": spec.run_id, "family": spec.model.family, "out_dir": str(out_dir)}
