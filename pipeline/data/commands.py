"""Verbs of the data stage: ``corpus``, ``tokenizer``, ``cache``; ``build-corpora`` (the shipped tiny corpora)."""

import argparse
import functools
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from pipeline.artifacts import atomic_write_json
from pipeline.commands import add_out_folder, add_ray_options, add_verb
from pipeline.data.rates import SLICE_DOCUMENTS, measure_slice
from pipeline.data.shards import DOCS_PER_SHARD, shards_done
from pipeline.execution.errors import subject
from pipeline.train.attempts import attempt_record, data_attempt_file


def _revision(prefetched: Path | None, item_id: str, revision: str | None) -> str | None:
    """The revision to load: the commit the hub item's prefetch record holds (when given), else the preset's own."""
    from pipeline.data.hub import is_local, recorded_commit

    if prefetched is None or is_local(item_id):
        return revision
    return recorded_commit(prefetched, item_id, revision)


def _attempted(verb: str, work: Callable[[argparse.Namespace], None]) -> Callable[[argparse.Namespace], None]:
    """The data verb ``work`` as attempt ``--attempt`` of its job: refused at once after a real failure
    (``pipeline.train.attempts``), its progress the shards it finished."""

    def attempt(args: argparse.Namespace) -> None:
        shards = lambda: shards_done(args.out)[0]  # noqa: E731
        try:
            with attempt_record(
                data_attempt_file(args.out), args.attempt, subject(verb, args), shards, "shard after {}"
            ):
                work(args)
        finally:  # the cache builder's Ray ends after the attempt's record (kept by a kill in a slow shutdown)
            if "ray" in sys.modules:
                sys.modules["ray"].shutdown()

    return attempt


def _export(args: argparse.Namespace, out: Path, **options) -> dict:
    """Export ``--source`` (a preset dataset's ``source``, as JSON) to ``out``; its manifest."""
    from pipeline.data.corpora import export_tiny_corpus
    from pipeline.data.hf_corpora import export_hf_corpus

    source = json.loads(args.source)
    options |= {
        "test_split": source.get("test_split", False),
        "docs_per_shard": source.get("docs_per_shard", DOCS_PER_SHARD),
        "overwrite": True,
    }
    if source["kind"] == "tiny":
        return export_tiny_corpus(source["corpus"], out, **options)
    return export_hf_corpus(
        source["id"],
        out,
        source=source["id"],
        validation_fraction=source.get("validation_fraction"),
        seed=source.get("seed", 0),
        revision=_revision(args.prefetched, source["id"], source.get("revision")),
        **options,
    )


def _corpus(args: argparse.Namespace) -> None:
    from pipeline.data.corpora import corpus_splits

    stats = _export(args, args.out)
    splits = corpus_splits(args.out)
    totals = {split: {key: stats[split][key] for key in ("documents", "characters")} for split in splits}
    logging.info("corpus %s: %s", args.out, json.dumps(totals))


def _data_rate(args: argparse.Namespace) -> None:
    import tempfile

    with tempfile.TemporaryDirectory(dir=args.out.parent, prefix=f".{args.out.name}.") as work:
        export = functools.partial(_export, args, first_rows=args.documents)
        measured = measure_slice(export, args.tokenizers, Path(work))
    atomic_write_json(args.out, measured)
    logging.info("data rates %s: %s", args.out, json.dumps(measured))


def _tokenizer(args: argparse.Namespace) -> None:
    from pipeline.data.corpora import corpus_split_files
    from pipeline.data.tokenizer import save_pretrained_tokenizer, train_bpe_tokenizer

    spec = json.loads(args.spec)
    if spec["kind"] == "bpe":
        files = [path for corpus in args.corpora for path in corpus_split_files(corpus, "train")]
        stats = train_bpe_tokenizer(files, spec["vocab_size"], args.out, overwrite=True)
    else:
        revision = _revision(args.prefetched, spec["name"], spec.get("revision"))
        stats = {
            **save_pretrained_tokenizer(spec["name"], args.out, revision=revision, overwrite=True),
            "revision": revision,
        }
    logging.info("tokenizer %s: %s", args.out, json.dumps(stats))


def _prefetch(args: argparse.Namespace) -> None:
    from pipeline.data.prefetch import run_prefetch

    kind = "dataset" if args.dataset is not None else "tokenizer"
    record = run_prefetch(kind, json.loads(args.dataset or args.tokenizer), args.out)
    logging.info("prefetched into %s: %s", os.environ.get("HF_HOME", "~/.cache/huggingface"), json.dumps(record))


def _cache(args: argparse.Namespace) -> None:
    """Every split of the corpus into ``<out>/{train,validation[,test]}``, the layout Levanter's ``cache_dir``
    expects; a rerun keeps the splits and shards an interrupted one finished (``build_token_cache``)."""
    from pipeline.data.cache import build_token_cache
    from pipeline.data.corpora import corpus_split_files, corpus_splits
    from pipeline.data.files import atomic_directory

    if args.ray_address:
        os.environ["RAY_ADDRESS"] = args.ray_address
    elif args.builder == "ray":
        from pipeline.execution.local_ray import start_local_ray

        start_local_ray(args.ray_num_cpus)  # Levanter's builder joins it; in a SLURM job, of the job's CPUs
    with atomic_directory(args.out, overwrite=True, resumable=True) as staging:
        stats = {
            split: build_token_cache(
                corpus_split_files(args.corpus, split),
                args.tokenizer,
                staging / split,
                builder=args.builder,
                overwrite=True,
            )
            for split in corpus_splits(args.corpus)
        }
        atomic_write_json(staging / "stats.json", stats)
        if args.builder == "ray":  # down before the output appears: a kill in its teardown leaves no output to delete
            import ray

            ray.shutdown()
    logging.info("token cache %s: %s", args.out, json.dumps(stats))


def _build_corpora(args: argparse.Namespace) -> None:
    from pipeline.data.build_corpora import corpus_filename, rebuild

    for name, splits in rebuild(args.out, args.deb_dir, args.check).items():
        for split, stats in splits.items():
            print(f"{corpus_filename(name, split)}: {stats['documents']} documents, {stats['characters']} characters")


def register(verbs: argparse._SubParsersAction) -> None:
    corpus = add_verb(verbs, "corpus", _attempted("corpus", _corpus), "export a corpus to JSONL shards")
    rate = add_verb(verbs, "data-rate", _data_rate, "time the export and tokenization of a corpus' first documents")
    for verb in (corpus, rate):
        verb.add_argument("--source", required=True, help="the dataset's `source` entry of the preset, as JSON")
    rate.add_argument("--documents", type=int, default=SLICE_DOCUMENTS, help="rows per split in the slice")
    rate.add_argument("tokenizers", nargs="*", type=Path, help="tokenizer folders to time (the slowest sizes)")
    tokenizer = add_verb(verbs, "tokenizer", _tokenizer, "train a byte-level BPE or save a pretrained tokenizer")
    tokenizer.add_argument("--spec", required=True, help="the tokenizer's entry of the preset, as JSON")
    for verb in (corpus, rate, tokenizer):
        verb.add_argument("--out", type=Path, required=True)
        verb.add_argument(
            "--prefetched",
            type=Path,
            help="the hub item's prefetch record: the item is loaded at the commit it records",
        )
    tokenizer.add_argument("corpora", nargs="*", type=Path, help="corpus folders to train a BPE on")

    prefetch = add_verb(
        verbs,
        "prefetch",
        _prefetch,
        "download one hub dataset or tokenizer of a preset into the Hugging Face cache (on a host with network)",
    )
    item = prefetch.add_mutually_exclusive_group(required=True)
    item.add_argument("--dataset", help="{name, id, revision} of a hub dataset (pipeline.data.prefetch.hub_items)")
    item.add_argument("--tokenizer", help="{name, id, revision} of a pretrained tokenizer on the hub")
    prefetch.add_argument("--out", type=Path, required=True, help="its record: what was fetched, at which commit")

    cache = add_verb(verbs, "cache", _attempted("cache", _cache), "build the Levanter token cache of a corpus")
    cache.add_argument("--corpus", type=Path, required=True)
    cache.add_argument("--tokenizer", type=Path, required=True)
    cache.add_argument("--builder", choices=("serial", "ray"), required=True)
    cache.add_argument("--out", type=Path, required=True)
    add_ray_options(cache)
    for verb in (corpus, cache):
        verb.add_argument("--attempt", type=int, default=1, help="Snakemake's attempt (pipeline.train.attempts)")

    build = add_verb(
        verbs,
        "build-corpora",
        _build_corpora,
        "rebuild the shipped tiny corpora from version-pinned Debian packages (maintainers; byte-identical output)",
    )
    add_out_folder(build, Path(__file__).resolve().parent / "corpora")
    build.add_argument(
        "--deb-dir", type=Path, help="folder holding (or receiving) the pinned .deb files (default: a temporary one)"
    )
    build.add_argument("--check", action="store_true", help="rebuild in a temporary folder and compare with --out")
