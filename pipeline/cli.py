"""`python -m pipeline <verb> ...`: the only entry point the Snakemake rules use.

Each verb is one function of one config; heavy imports (JAX, Levanter, Ray) happen inside the verb so
that `--help` and light verbs start fast.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from pipeline.artifacts import atomic_write_json


def _corpus(args: argparse.Namespace) -> None:
    from pipeline.data.corpora import export_tiny_corpus
    from pipeline.data.hf_corpora import export_hf_corpus

    source = json.loads(args.source)
    if source["kind"] == "tiny":
        stats = export_tiny_corpus(source["corpus"], args.out, overwrite=True)
    else:
        stats = export_hf_corpus(source["id"], args.out, source=source["id"],
                                 validation_fraction=source.get("validation_fraction"), seed=source.get("seed", 0),
                                 revision=source.get("revision"), overwrite=True)
    logging.info("corpus %s: %s", args.out, json.dumps(stats))


def _tokenizer(args: argparse.Namespace) -> None:
    from pipeline.data.corpora import corpus_split_files
    from pipeline.data.tokenizer import save_pretrained_tokenizer, train_bpe_tokenizer

    spec = json.loads(args.spec)
    if spec["kind"] == "bpe":
        files = [path for corpus in args.corpora for path in corpus_split_files(corpus, "train")]
        stats = train_bpe_tokenizer(files, spec["vocab_size"], args.out, overwrite=True)
    else:
        stats = save_pretrained_tokenizer(spec["name"], args.out, overwrite=True)
    logging.info("tokenizer %s: %s", args.out, json.dumps(stats))


def _cache(args: argparse.Namespace) -> None:
    """Both splits into ``<out>/{train,validation}``, the layout Levanter's ``cache_dir`` expects."""
    from pipeline.data.cache import build_token_cache
    from pipeline.data.corpora import corpus_split_files
    from pipeline.data.files import atomic_directory

    if args.ray_address:
        os.environ["RAY_ADDRESS"] = args.ray_address
    with atomic_directory(args.out, overwrite=True) as staging:
        stats = {split: build_token_cache(corpus_split_files(args.corpus, split), args.tokenizer, staging / split,
                                          builder=args.builder)
                 for split in ("train", "validation")}
        atomic_write_json(staging / "stats.json", stats)
    logging.info("token cache %s: %s", args.out, json.dumps(stats))


def _pretrain(args: argparse.Namespace) -> None:
    """Paths go to the task absolute: a worker of an existing Ray cluster runs in the cluster's directory."""
    from pipeline.runner import run_on_ray
    from pipeline.train.pretrain import pretrain

    paths = [str(path.resolve()) for path in (args.run_dir, args.cache, args.tokenizer)]
    summary = run_on_ray(pretrain, args.spec, *paths, address=args.ray_address, num_cpus=args.ray_num_cpus,
                         num_gpus=args.gpus)
    logging.info("pretrain finished: %s", json.dumps(summary))


def _perplexity_table(args: argparse.Namespace) -> None:
    from pipeline.report.tables import write_perplexity_tables

    write_perplexity_tables(args.summaries, markdown=args.markdown, csv=args.csv, runs_csv=args.runs_csv)


def _add_ray(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ray-address", default=None, help="existing Ray cluster ('auto' or host:port)")
    parser.add_argument("--ray-num-cpus", type=int, default=None, help="CPUs of the embedded local Ray")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipeline", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)

    corpus = verbs.add_parser("corpus", help="export a corpus to JSONL train/validation splits")
    corpus.add_argument("--source", required=True, help="the dataset's `source` entry of the preset, as JSON")
    corpus.add_argument("--out", type=Path, required=True)
    corpus.set_defaults(run=_corpus)

    tokenizer = verbs.add_parser("tokenizer", help="train a byte-level BPE or save a pretrained tokenizer")
    tokenizer.add_argument("--spec", required=True, help="the tokenizer's entry of the preset, as JSON")
    tokenizer.add_argument("--out", type=Path, required=True)
    tokenizer.add_argument("corpora", nargs="*", type=Path, help="corpus folders to train a BPE on")
    tokenizer.set_defaults(run=_tokenizer)

    cache = verbs.add_parser("cache", help="build the Levanter token cache of a corpus")
    cache.add_argument("--corpus", type=Path, required=True)
    cache.add_argument("--tokenizer", type=Path, required=True)
    cache.add_argument("--builder", choices=("serial", "ray"), required=True)
    cache.add_argument("--out", type=Path, required=True)
    _add_ray(cache)
    cache.set_defaults(run=_cache)

    pretrain = verbs.add_parser("pretrain", help="train one run of the grid on Levanter, as a Ray task")
    pretrain.add_argument("--spec", required=True, help="the run's resolved RunSpec, as JSON")
    pretrain.add_argument("--run-dir", type=Path, required=True)
    pretrain.add_argument("--cache", type=Path, required=True)
    pretrain.add_argument("--tokenizer", type=Path, required=True)
    pretrain.add_argument("--gpus", type=float, default=0)
    _add_ray(pretrain)
    pretrain.set_defaults(run=_pretrain)

    table = verbs.add_parser("perplexity-table", help="Tables 1-2 from run summaries")
    table.add_argument("--markdown", type=Path, required=True)
    table.add_argument("--csv", type=Path, required=True)
    table.add_argument("--runs-csv", type=Path, required=True)
    table.add_argument("summaries", nargs="+", type=Path)
    table.set_defaults(run=_perplexity_table)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0
