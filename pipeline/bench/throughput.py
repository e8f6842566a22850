"""Throughput benchmark: GPT vs DiffEqFormer at matched dimensions in one process (paper App. D.1;
docs/testing.md#benchmarks), interleaved round by round: a jitted AdamW train step of each, and jitted forwards of
GPT, the discretised DiffEqFormer, the continuous one (regenerating W(t_k) each call) and the weight generation
alone. Timings need an idle host: the report records the load and flags ``contended``."""

import dataclasses
import datetime
import importlib.metadata
import os
import platform
import resource
import time

PAPER_GOALS = {"train": 1.15, "inference_discrete": 1.05}
"""Paper's cost of DiffEqFormer relative to GPT: training ≤ 1.15×, discretised inference ≤ 1.05× (App. D.1)."""
IDLE_LOAD = 1.0
"""1-minute load average below which ``--wait-idle-minutes`` starts the measurement."""
BUSY_LOAD = 1.5
"""1-minute load average at the start (this process's imports included) above which the run counts as contended."""
INIT_PRNG = "rbg"
"""PRNG of the random init: XLA compiles DiffEqFormer's init 2-3x faster on CPU than with threefry."""
MAX_FOREIGN_CPU = 0.1
"""Share of the host's CPU time other processes may use during the run before it counts as contended."""


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """Shape of the matched models and of the measurement (float32, dropout 0)."""

    hidden_dim: int = 256
    num_layers: int = 6
    num_heads: int = 4
    seq_len: int = 256
    batch_size: int = 8
    vocab_size: int = 2048
    time_embed_dim: int = 20
    sinusoidal_dim: int = 128
    repeats: int = 15
    warmup: int = 2
    learning_rate: float = 1e-4
    weight_decay: float = 0.1
    seed: int = 0


def build_models(cfg: BenchConfig):
    """GPT and GPT-based DiffEqFormer of the same dimensions, randomly initialised."""
    import equinox as eqx
    import haliax as hax
    import jax

    from pipeline.models import build_model_config

    dimensions = dict(
        seq_len=cfg.seq_len, hidden_dim=cfg.hidden_dim, num_heads=cfg.num_heads, num_layers=cfg.num_layers
    )
    gpt = build_model_config("gpt", **dimensions, dropout=0.0)
    diffeq = build_model_config(
        "diffeq", **dimensions, dropout=0.0, time_embed_dim=cfg.time_embed_dim, sinusoidal_dim=cfg.sinusoidal_dim
    )
    Vocab = hax.Axis("vocab", cfg.vocab_size)
    build = eqx.filter_jit(lambda config, key: config.build(Vocab, key=key))
    with jax.default_prng_impl(INIT_PRNG):
        k_gpt, k_diffeq = jax.random.split(jax.random.PRNGKey(cfg.seed))
        return build(gpt, k_gpt), build(diffeq, k_diffeq)


def _foreign_cpu_seconds() -> float:
    """CPU time the host's other processes have used since boot: all processes' (/proc/stat: everything but idle and
    iowait) less this one's."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    busy = (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")
    own = resource.getrusage(resource.RUSAGE_SELF)
    return busy - own.ru_utime - own.ru_stime


def host_info() -> dict:
    """CPU model and core count of this host."""
    import jax

    with open("/proc/cpuinfo") as f:
        names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    model = names[0] if names else platform.processor() or "unknown"
    return {"cpu_model": model, "cores": os.cpu_count(), "jax_backend": jax.default_backend()}


def run_benchmark(cfg: BenchConfig) -> dict:
    """Measure train-step and inference times of GPT vs DiffEqFormer at ``cfg``; the report as a dict."""
    import equinox as eqx
    import haliax as hax
    import jax
    import jmp
    import numpy as np
    import optax
    from levanter.layers.attention import AttentionMask
    from levanter.models.lm_model import LmExample

    from pipeline.bench.timing import TrainLoop, summarise, time_interleaved
    from pipeline.models import discretize
    from pipeline.models.param_count import count_leaves

    discretize_jit = eqx.filter_jit(discretize)
    logits = eqx.filter_jit(lambda model, input_ids: model(input_ids, AttentionMask.causal()).array)
    load_start, wall_start, foreign_start = os.getloadavg(), time.perf_counter(), _foreign_cpu_seconds()

    gpt, diffeq = build_models(cfg)
    discrete = jax.block_until_ready(discretize_jit(diffeq, cfg.num_layers))
    params = {
        name: count_leaves(eqx.filter(m, eqx.is_array))
        for name, m in (("gpt", gpt), ("diffeq", diffeq), ("diffeq_discrete", discrete))
    }

    Batch = hax.Axis("batch", cfg.batch_size)
    tokens = hax.random.randint(jax.random.PRNGKey(cfg.seed + 1), (Batch, gpt.Pos), 0, cfg.vocab_size)
    n_tokens = cfg.batch_size * cfg.seq_len

    samples, outputs = time_interleaved(
        {
            "gpt": lambda: logits(gpt, tokens),
            "diffeq_discrete": lambda: logits(discrete, tokens),
            "diffeq_continuous": lambda: logits(diffeq, tokens),
            "weight_generation": lambda: discretize_jit(diffeq, cfg.num_layers),
        },
        cfg.repeats,
        cfg.warmup,
    )
    inference = {name: summarise(s, n_tokens) for name, s in samples.items()}
    del inference["weight_generation"]["tokens_per_s"]
    gpt_ms = inference["gpt"]["median_ms"]
    inference["ratio_discrete"] = inference["diffeq_discrete"]["median_ms"] / gpt_ms
    inference["ratio_continuous"] = inference["diffeq_continuous"]["median_ms"] / gpt_ms
    inference["paper_goal_discrete"] = PAPER_GOALS["inference_discrete"]
    inference["meets_goal_discrete"] = bool(inference["ratio_discrete"] <= PAPER_GOALS["inference_discrete"])
    inference["max_abs_logit"] = float(np.abs(outputs["diffeq_continuous"]).max())
    inference["max_abs_logit_diff"] = float(np.abs(outputs["diffeq_discrete"] - outputs["diffeq_continuous"]).max())

    # Training last: the train steps donate (consume) the models' buffers.
    optimizer = optax.adamw(cfg.learning_rate, weight_decay=cfg.weight_decay)
    example, policy = hax.vmap(LmExample.causal, Batch)(tokens), jmp.get_policy("f32")
    samples, _ = time_interleaved(
        {"gpt": TrainLoop(gpt, optimizer, example, policy), "diffeq": TrainLoop(diffeq, optimizer, example, policy)},
        cfg.repeats,
        cfg.warmup,
    )
    train = {name: summarise(s, n_tokens) for name, s in samples.items()}
    train["ratio"] = train["diffeq"]["median_ms"] / train["gpt"]["median_ms"]
    train["paper_goal"] = PAPER_GOALS["train"]
    train["meets_goal"] = bool(train["ratio"] <= PAPER_GOALS["train"])

    wall = time.perf_counter() - wall_start
    foreign_share = max(_foreign_cpu_seconds() - foreign_start, 0.0) / (wall * os.cpu_count())
    return {
        "benchmark": "throughput: GPT vs DiffEqFormer (GPT-based), train step and inference",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": host_info(),
        "versions": {pkg: importlib.metadata.version(pkg) for pkg in ("jax", "jaxlib", "levanter", "haliax", "optax")},
        "config": {
            **dataclasses.asdict(cfg),
            "dtype": "float32",
            "dropout": 0.0,
            "optimizer": "adamw",
            "gradient_checkpointing": diffeq.config.gradient_checkpointing,
            "discrete_steps": cfg.num_layers,
        },
        "load_average": {"start": list(load_start), "end": list(os.getloadavg())},
        "foreign_cpu_share": foreign_share,
        "contended": bool(load_start[0] > BUSY_LOAD or foreign_share > MAX_FOREIGN_CPU),
        "wall_s": wall,
        "params": params,
        "train": train,
        "inference": inference,
    }


def _cell(entry: dict) -> str:
    return f"{entry['median_ms']:.1f} [{entry['iqr_ms']:.1f}]"


def markdown(result: dict) -> str:
    """A short Markdown summary: the ratios next to the paper's goals."""
    from pipeline.artifacts import markdown_table

    cfg, train, inf = result["config"], result["train"], result["inference"]
    load, params = result["load_average"], result["params"]

    def table_row(label: str, part: dict, suffix: str = "") -> list[str]:
        """GPT's and DiffEqFormer's times (keys ``gpt``, ``diffeq<suffix>``), their ratio, and the paper's goal for
        it and whether it is met (``—`` where the paper sets none)."""
        goal = part.get(f"paper_goal{suffix}")
        times = [_cell(part["gpt"]), _cell(part[f"diffeq{suffix}"]), f"{part[f'ratio{suffix}']:.3f}×"]
        if goal is None:
            return [label, *times, "—", "—"]
        return [label, *times, f"≤ {goal}×", "yes" if part[f"meets_goal{suffix}"] else "no"]

    lines = [
        "# Throughput: GPT vs DiffEqFormer (GPT-based)",
        "",
        f"hidden {cfg['hidden_dim']}, {cfg['num_layers']} layers, {cfg['num_heads']} heads, seq {cfg['seq_len']}, "
        f"batch {cfg['batch_size']}, vocab {cfg['vocab_size']}, D={cfg['time_embed_dim']}, "
        f"S={cfg['sinusoidal_dim']}, {cfg['dtype']}, dropout 0; {cfg['repeats']} interleaved repeats.",
        f"Host: {result['host']['cpu_model']}, {result['host']['cores']} cores; jax {result['versions']['jax']}, "
        f"levanter {result['versions']['levanter']}; {result['date']}.",
        f"Load average (1 min) at start {load['start'][0]:.2f}, at end {load['end'][0]:.2f} (includes this run); "
        f"other processes' CPU share during the run {result['foreign_cpu_share']:.0%}; "
        f"contended: {'yes' if result['contended'] else 'no'}.",
        "",
        markdown_table(
            ["Measurement", "GPT ms, median [IQR]", "DiffEqFormer ms, median [IQR]", "Ratio", "Paper goal", "Met"],
            [
                table_row("Train step (AdamW)", train),
                table_row("Inference, discretised (N' = L)", inf, "_discrete"),
                table_row("Inference, continuous", inf, "_continuous"),
            ],
        ),
        "",
        f"Weight generation W(t_k) for all L steps (the continuous model's extra work per call): "
        f"{_cell(inf['weight_generation'])} ms. Discretised vs continuous logits: max abs diff "
        f"{inf['max_abs_logit_diff']:.1e} (max |logit| {inf['max_abs_logit']:.2f}).",
        f"Parameters: GPT {params['gpt']:,}, DiffEqFormer {params['diffeq']:,}, "
        f"discretised {params['diffeq_discrete']:,}.",
        "",
    ]
    return "\n".join(lines)


def wait_for_idle(max_load: float, timeout_s: float, poll_s: float = 30.0) -> float:
    """Poll the 1-minute load average until it is below ``max_load`` or ``timeout_s`` passes; seconds waited."""
    start = time.monotonic()
    while os.getloadavg()[0] >= max_load and time.monotonic() - start < timeout_s:
        time.sleep(poll_s)
    return time.monotonic() - start
