"""Throughput benchmark: GPT vs DiffEqFormer (GPT-based) at one matched shape, in one process (paper App. D.1).

Times, with the models interleaved round by round (A B A B …) so that drift of the host affects all alike:

- a jitted AdamW train step (loss + gradient + update, buffers donated) of GPT and of DiffEqFormer;
- a jitted forward (logits) of GPT, of the discretised DiffEqFormer (``discretize(model, L)``, materialised once
  outside the timed region), and of the continuous DiffEqFormer (which regenerates W(t_k) on every call), plus
  the weight generation alone (the jitted ``discretize``), which is the continuous model's extra work.

Run as ``python -m pipeline.analysis.throughput --out results/benchmarks/throughput-cpu.json``; it writes the
JSON and a Markdown summary beside it. Timings are only meaningful on an otherwise idle host: the report
records the load average and the CPU time other processes took during the run, and flags ``contended``.
"""

import argparse
import dataclasses
import datetime
import importlib.metadata
import json
import os
import platform
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import equinox as eqx
import haliax as hax
import jax
import numpy as np
import optax
from levanter.layers.attention import AttentionMask
from levanter.models.lm_model import LmExample, compute_next_token_loss

from pipeline.models import build_model_config, discretize
from pipeline.models.param_count import count_leaves

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


@dataclass(frozen=True)
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

    @property
    def tokens_per_batch(self) -> int:
        return self.batch_size * self.seq_len


def build_models(cfg: BenchConfig):
    """GPT and GPT-based DiffEqFormer of the same shape, randomly initialised."""
    shape = dict(seq_len=cfg.seq_len, hidden_dim=cfg.hidden_dim, num_heads=cfg.num_heads, num_layers=cfg.num_layers)
    gpt = build_model_config("gpt", **shape, dropout=0.0)
    diffeq = build_model_config(
        "diffeq", **shape, dropout=0.0, time_embed_dim=cfg.time_embed_dim, sinusoidal_dim=cfg.sinusoidal_dim
    )
    Vocab = hax.Axis("vocab", cfg.vocab_size)
    with jax.default_prng_impl(INIT_PRNG):
        k_gpt, k_diffeq = jax.random.split(jax.random.PRNGKey(cfg.seed))
        return _build(gpt, Vocab, k_gpt), _build(diffeq, Vocab, k_diffeq)


@eqx.filter_jit
def _build(config, Vocab, key):
    return config.build(Vocab, key=key)


_discretize = eqx.filter_jit(discretize)


@eqx.filter_jit
def _logits(model, input_ids):
    return model(input_ids, AttentionMask.causal()).array


@eqx.filter_jit(donate="all-except-first")
def _train_step(example, model, opt_state, optimizer):
    def loss_fn(model):
        return compute_next_token_loss(model, example).array

    loss, grads = eqx.filter_value_and_grad(loss_fn)(model)
    updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_inexact_array))
    return loss, eqx.apply_updates(model, updates), opt_state


class TrainLoop:
    """Calling it runs one AdamW step in place (the previous model and optimiser state are donated)."""

    def __init__(self, model, optimizer, example):
        self.model, self.optimizer, self.example = model, optimizer, example
        self.opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))

    def __call__(self):
        loss, self.model, self.opt_state = _train_step(self.example, self.model, self.opt_state, self.optimizer)
        return loss, self.model, self.opt_state


def time_interleaved(calls: dict[str, Callable], repeats: int, warmup: int) -> tuple[dict[str, list], dict]:
    """Warm up (compile) each call, then ``repeats`` rounds calling each once in turn; seconds per call.

    Also returns each call's last output.
    """
    outputs = {}
    for name, call in calls.items():
        for _ in range(warmup):
            outputs[name] = jax.block_until_ready(call())
    samples = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            outputs[name] = jax.block_until_ready(call())
            samples[name].append(time.perf_counter() - start)
    return samples, outputs


def summarise(seconds: list[float], tokens: int) -> dict:
    """Median and interquartile range in ms, tokens/s at the median, and the raw samples."""
    q25, median, q75 = (float(q) for q in np.percentile(seconds, [25, 50, 75]))
    return {
        "median_ms": 1e3 * median,
        "iqr_ms": 1e3 * (q75 - q25),
        "tokens_per_s": tokens / median,
        "samples_ms": [1e3 * s for s in seconds],
    }


def _cpu_busy_seconds() -> float:
    """CPU time all processes of the host have used since boot (/proc/stat: everything but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]
    return busy / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def host_info() -> dict:
    """CPU model and core count of this host."""
    model = platform.processor() or "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpu_model": model, "cores": os.cpu_count(), "jax_backend": jax.default_backend()}


def run_benchmark(cfg: BenchConfig) -> dict:
    """Measure train-step and inference times of GPT vs DiffEqFormer at ``cfg``; the report as a dict."""
    load_start, wall_start = os.getloadavg(), time.perf_counter()
    busy_start, own_start = _cpu_busy_seconds(), _own_cpu_seconds()

    gpt, diffeq = build_models(cfg)
    discrete = jax.block_until_ready(_discretize(diffeq, cfg.num_layers))
    params = {
        name: count_leaves(eqx.filter(m, eqx.is_array))
        for name, m in (("gpt", gpt), ("diffeq", diffeq), ("diffeq_discrete", discrete))
    }

    Batch = hax.Axis("batch", cfg.batch_size)
    tokens = hax.random.randint(jax.random.PRNGKey(cfg.seed + 1), (Batch, gpt.Pos), 0, cfg.vocab_size)
    n_tokens = cfg.tokens_per_batch

    samples, logits = time_interleaved(
        {
            "gpt": lambda: _logits(gpt, tokens),
            "diffeq_discrete": lambda: _logits(discrete, tokens),
            "diffeq_continuous": lambda: _logits(diffeq, tokens),
            "weight_generation": lambda: _discretize(diffeq, cfg.num_layers),
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
    inference["max_abs_logit"] = float(np.abs(logits["diffeq_continuous"]).max())
    inference["max_abs_logit_diff"] = float(np.abs(logits["diffeq_discrete"] - logits["diffeq_continuous"]).max())

    # Training last: the train steps donate (consume) the models' buffers.
    optimizer = optax.adamw(cfg.learning_rate, weight_decay=cfg.weight_decay)
    example = hax.vmap(LmExample.causal, Batch)(tokens)
    samples, _ = time_interleaved(
        {"gpt": TrainLoop(gpt, optimizer, example), "diffeq": TrainLoop(diffeq, optimizer, example)},
        cfg.repeats,
        cfg.warmup,
    )
    train = {name: summarise(s, n_tokens) for name, s in samples.items()}
    train["ratio"] = train["diffeq"]["median_ms"] / train["gpt"]["median_ms"]
    train["paper_goal"] = PAPER_GOALS["train"]
    train["meets_goal"] = bool(train["ratio"] <= PAPER_GOALS["train"])

    wall = time.perf_counter() - wall_start
    foreign = (_cpu_busy_seconds() - busy_start) - (_own_cpu_seconds() - own_start)
    foreign_share = max(foreign, 0.0) / (wall * os.cpu_count())
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
    cfg, train, inf = result["config"], result["train"], result["inference"]
    load, params = result["load_average"], result["params"]

    def met(ok: bool) -> str:
        return "yes" if ok else "no"

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
        f"contended: {met(result['contended'])}.",
        "",
        "| Measurement | GPT ms, median [IQR] | DiffEqFormer ms, median [IQR] | Ratio | Paper goal | Met |",
        "|---|---|---|---|---|---|",
        f"| Train step (AdamW) | {_cell(train['gpt'])} | {_cell(train['diffeq'])} | {train['ratio']:.3f}× "
        f"| ≤ {train['paper_goal']}× | {met(train['meets_goal'])} |",
        f"| Inference, discretised (N' = L) | {_cell(inf['gpt'])} | {_cell(inf['diffeq_discrete'])} "
        f"| {inf['ratio_discrete']:.3f}× | ≤ {inf['paper_goal_discrete']}× | {met(inf['meets_goal_discrete'])} |",
        f"| Inference, continuous | {_cell(inf['gpt'])} | {_cell(inf['diffeq_continuous'])} "
        f"| {inf['ratio_continuous']:.3f}× | — | — |",
        "",
        f"Weight generation W(t_k) for all L steps (the continuous model's extra work per call): "
        f"{_cell(inf['weight_generation'])} ms. Discretised vs continuous logits: max abs diff "
        f"{inf['max_abs_logit_diff']:.1e} (max |logit| {inf['max_abs_logit']:.2f}).",
        f"Parameters: GPT {params['gpt']:,}, DiffEqFormer {params['diffeq']:,}, "
        f"discretised {params['diffeq_discrete']:,}.",
        "",
    ]
    return "\n".join(lines)


def write_report(result: dict, out: Path) -> None:
    """Write ``result`` as JSON to ``out`` and its Markdown summary beside it (``.md``)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(result))


def wait_for_idle(max_load: float, timeout_s: float, poll_s: float = 30.0) -> float:
    """Poll the 1-minute load average until it is below ``max_load`` or ``timeout_s`` passes; seconds waited."""
    start = time.monotonic()
    while os.getloadavg()[0] >= max_load and time.monotonic() - start < timeout_s:
        time.sleep(poll_s)
    return time.monotonic() - start


def main(argv=None) -> int:
    """Command line: run the benchmark once and write the JSON and Markdown reports."""
    parser = argparse.ArgumentParser(prog="python -m pipeline.analysis.throughput", description=__doc__.split("\n")[0])
    for field in dataclasses.fields(BenchConfig):
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=field.type, default=field.default)
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/throughput-cpu.json"))
    parser.add_argument(
        "--wait-idle-minutes",
        type=float,
        default=0.0,
        help=f"first wait up to this long for the 1-min load average to drop below {IDLE_LOAD}",
    )
    args = vars(parser.parse_args(argv))
    out, wait_minutes = args.pop("out"), args.pop("wait_idle_minutes")

    waited = wait_for_idle(IDLE_LOAD, 60 * wait_minutes) if wait_minutes > 0 else 0.0
    result = run_benchmark(BenchConfig(**args))
    result["waited_for_idle_s"] = waited
    write_report(result, out)
    print(markdown(result))
    if result["contended"]:
        print("WARNING: the host was busy during the run; the timings are not reliable.", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
