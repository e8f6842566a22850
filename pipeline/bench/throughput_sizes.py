"""Measure training tokens/s per GPU of every model a preset trains, for the measured table
(``pipeline.planning.measured``; docs/planning.md#cost-preview). Per distinct (family, size, num_layers),
``repeats`` train steps (``pipeline.bench.timing.train_step``, the run's compute dtype and AdamW) are timed after
``warmup`` on micro_batch × seq_len random tokens: tokens/s per GPU = micro_batch × seq_len / median step time. A
model that does not fit is skipped (the preview estimates it); rows not measured this time are kept."""

import csv
import datetime
import io
import logging
import re
from pathlib import Path

from pipeline.planning.grid import Grid, Workload
from pipeline.planning.measured import THROUGHPUT_COLUMNS, default_throughput_path

logger = logging.getLogger(__name__)


def models_to_measure(config: dict, families: list[str] | None, sizes: list[str] | None) -> list[Workload]:
    """One workload (the first run) per (family, size, num_layers) that the preset trains, filtered."""
    chosen: dict[tuple[str, str, int], Workload] = {}
    for workload in Grid.load(config).training.values():
        if (families and workload.family not in families) or (sizes and workload.run.size not in sizes):
            continue
        chosen.setdefault(workload.throughput_key, workload)
    return list(chosen.values())


def device_label(device_kind: str, platform: str) -> str:
    """A short device name from JAX's ``device_kind`` ('NVIDIA H100 80GB HBM3' → 'h100'), else the platform."""
    match = re.search(r"\b([a-z]\d{2,3})\b", device_kind.lower())
    return match.group(1) if match else platform


def measure_workload(workload: Workload, micro_batch: int, repeats: int, warmup: int) -> dict:
    """Median seconds of one train step of ``workload``'s model and its training tokens/s on the first device."""
    import equinox as eqx
    import haliax as hax
    import jax
    import jmp
    from levanter.models.lm_model import LmExample

    from pipeline.bench.timing import TrainLoop, summarise, time_interleaved
    from pipeline.models.param_count import count_leaves
    from pipeline.train.setup import optimizer_config

    train, vocab = workload.train, workload.known_vocab
    batch_size = min(micro_batch, train.batch_size)
    model_key, data_key, dropout_key = jax.random.split(jax.random.PRNGKey(train.seed), 3)
    config = workload.recipe.build()
    model = eqx.filter_jit(config.build)(hax.Axis("vocab", vocab), key=model_key)
    optimizer = optimizer_config(train).build(train.steps)
    Batch = hax.Axis("batch", batch_size)
    tokens = hax.random.randint(data_key, (Batch, config.Pos), 0, vocab)
    example = hax.vmap(LmExample.causal, Batch)(tokens)
    step = TrainLoop(model, optimizer, example, jmp.get_policy(train.mixed_precision), key=dropout_key)
    samples, _ = time_interleaved({"train": step}, repeats, warmup)
    result = summarise(samples["train"], batch_size * workload.run.model.seq_len)
    result.update(params=count_leaves(eqx.filter(step.model, eqx.is_array)), micro_batch=batch_size)
    return result


def measure(
    preset: str,
    device: str | None,
    micro_batch: int,
    repeats: int,
    warmup: int,
    families: list[str] | None = None,
    sizes: list[str] | None = None,
    out: Path | None = None,
) -> Path:
    """Measure the preset's models on this host's first device and write (merge into) the throughput table."""
    import jax

    from pipeline.artifacts import atomic_write_text, csv_text
    from pipeline.config import load_preset

    config = load_preset({"preset": preset})
    first = jax.devices()[0]
    device = device or device_label(first.device_kind, first.platform)
    out = out or default_throughput_path(device)
    today = datetime.date.today().isoformat()
    rows = {}
    for workload in models_to_measure(config, families, sizes):
        key = "/".join(map(str, workload.throughput_key))
        try:
            result = measure_workload(workload, micro_batch, repeats, warmup)
        except jax.errors.JaxRuntimeError as error:
            if "RESOURCE_EXHAUSTED" not in str(error):
                raise
            logger.warning(
                "%s (%s): does not fit %s at micro-batch %d; not measured", workload.run_id, key, device, micro_batch
            )
            continue
        logger.info("%s: %.0f tokens/s (step %.1f ms)", key, result["tokens_per_s"], result["median_ms"])
        rows[workload.throughput_key] = {
            "device": device,
            "family": workload.family,
            "size": workload.run.size,
            "hidden_dim": workload.run.model.hidden_dim,
            "num_layers": workload.num_layers,
            "seq_len": workload.run.model.seq_len,
            "params": result["params"],
            "tokens_per_s_per_gpu": round(result["tokens_per_s"], 1),
            "measured_on": today,
            "notes": (
                f"{workload.run_id}; micro-batch {result['micro_batch']}; {workload.train.mixed_precision}; "
                f"median of {repeats} steps (IQR {result['iqr_ms']:.1f} ms); {first.device_kind}; "
                f"jax {jax.__version__}"
            ),
        }
    measured = {(device, family, size, str(layers)) for family, size, layers in rows}
    previous = list(csv.DictReader(io.StringIO(out.read_text()))) if out.is_file() else []
    kept = [row for row in previous if (row["device"], row["family"], row["size"], row["num_layers"]) not in measured]
    atomic_write_text(out, csv_text(kept + list(rows.values()), THROUGHPUT_COLUMNS))
    return out
