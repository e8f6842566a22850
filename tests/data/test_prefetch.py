"""Prefetch and offline compute: the paper preset's pins, OpenWebText from a local parquet copy, hub items missing from
the cache fail with one sentence naming the prefetch, lm-eval tasks load one by one (a broken task is named, the others
still load)."""

import json
import shutil

import datasets
import pytest
from cli_testkit import ROOT, pipeline_verb
from lm_eval.tasks._factory import TaskFactory

from pipeline.config import load_preset
from pipeline.data.files import iter_texts
from pipeline.data.hf_corpora import export_hf_corpus
from pipeline.data.hub import PREFETCH_COMMAND
from pipeline.data.prefetch import hub_items
from pipeline.evaluate.lm_eval_tasks import check_scored_output_types, load_lm_eval_tasks, task_manager
from pipeline.evaluate.task_sources import prefetch_task

TASKS = ROOT / "pipeline" / "evaluate" / "tasks"
DOCS = [f"Web page {i}: some words about the open web." for i in range(40)]


def offline_env(tmp_path) -> dict:
    """An offline job's environment beyond this process's: the test's own Hugging Face cache, the hub offline."""
    return {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}


UNPINNED = {"dlwh/wikitext_103_detokenized", "cimec/lambada", "EleutherAI/logiqa", "lighteval/winograd_wsc"}
"""The paper preset's hub items of which no commit was found pinned in public code (fetched at main)."""


def test_the_paper_preset_pins_every_hub_item_with_a_known_commit_and_the_tiny_preset_has_none():
    config = load_preset({"preset": "paper"})
    paper = hub_items(config)
    assert {
        "name": "owt",
        "id": "Skylion007/openwebtext",
        "revision": "433fe0f44ed7894fea29c08b3202aa348ccc6369",
    } in paper["datasets"]
    assert [item["id"] for item in paper["tokenizers"]] == ["gpt2", "NousResearch/Llama-2-7b-hf"]
    assert len(paper["lm_eval_tasks"]) == 11 and "logiqa" in paper["lm_eval_tasks"]
    unpinned = {item["id"] for item in paper["datasets"] + paper["tokenizers"] if item["revision"] is None}
    index, factory = task_manager(None).task_index, TaskFactory()
    task_datasets = {
        factory._load_full_config(index[task])["dataset_path"] for task in paper["lm_eval_tasks"] if task != "mmlu"
    } | {factory._load_full_config(index["mmlu_anatomy"])["dataset_path"]}
    revisions = config["downstream"]["revisions"]
    assert set(revisions) <= task_datasets
    assert unpinned | (task_datasets - set(revisions)) == UNPINNED
    assert hub_items(load_preset({"preset": "tiny"})) == {"datasets": [], "tokenizers": [], "lm_eval_tasks": []}


def test_openwebtext_exports_offline_from_a_local_copy_of_its_parquet_branch(tmp_path, monkeypatch):
    """The layout of the hub's refs/convert/parquet branch (<config>/<split>/NNNN.parquet), loaded offline."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    branch = tmp_path / "openwebtext-parquet" / "plain_text" / "train"
    branch.mkdir(parents=True)
    datasets.Dataset.from_dict({"text": DOCS[:30]}).to_parquet(str(branch / "0000.parquet"))
    datasets.Dataset.from_dict({"text": DOCS[30:]}).to_parquet(str(branch / "0001.parquet"))
    stats = export_hf_corpus(
        "owt",
        tmp_path / "out",
        source=tmp_path / "openwebtext-parquet",
        validation_fraction=0.1,
        seed=2357,
        cache_dir=tmp_path / "cache",
    )
    expected = datasets.Dataset.from_dict({"text": DOCS}).train_test_split(test_size=0.1, seed=2357, shuffle=True)
    assert list(iter_texts(stats["validation"]["files"])) == expected["test"]["text"]
    assert list(iter_texts(stats["train"]["files"])) == expected["train"]["text"]


HUB_JOBS = {
    "corpus": (
        "--source",
        {"kind": "hf", "id": "Skylion007/openwebtext", "revision": "refs/convert/parquet"},
        "Dataset 'Skylion007/openwebtext' ({})",
    ),
    "tokenizer": ("--spec", {"kind": "pretrained", "name": "gpt2"}, "Tokenizer {}"),
}
"""A job of each kind that reads a hub item: its option, the item's spec and how a missing item is named."""


@pytest.mark.parametrize("stale_record", [False, True], ids=["missing", "record-of-another-revision"])
@pytest.mark.parametrize("verb", list(HUB_JOBS))
def test_an_offline_job_without_its_hub_item_names_it_and_the_prefetch(tmp_path, verb, stale_record):
    """A hub item missing from the cache, or a prefetch record of another revision of it: one sentence naming it and
    the prefetch, nothing written."""
    option, spec, named = HUB_JOBS[verb]
    hub_id, record = spec.get("id", spec.get("name")), tmp_path / "record.json"
    item = f"{hub_id}@{spec.get('revision', 'main')}"
    record.write_text(json.dumps({"name": "old", "id": hub_id, "revision": "v1", "commit": "0" * 40}))
    prefetched = ["--prefetched", str(record)] if stale_record else []
    out = ["--out", str(tmp_path / "out")]
    result = pipeline_verb(verb, option, json.dumps(spec), *prefetched, *out, env=offline_env(tmp_path), timeout=300)
    assert result.returncode == 1, result.stderr[-3000:]
    assert result.stderr.splitlines()[-1] == (
        f"error: {item} is not the item of the prefetch record {record} ({hub_id}@v1); "
        f"rerun the prefetch (`{PREFETCH_COMMAND}`)."
        if stale_record
        else f"error: {named.format(item)} is not in the Hugging Face cache {tmp_path / 'hf'} and this job runs with "
        f"the hub offline; prefetch it on a host with network (`{PREFETCH_COMMAND}`, with the same site settings)."
    )
    assert not (tmp_path / "out").exists()


@pytest.fixture
def task_dir_with_a_broken_task(tmp_path):
    task_dir = tmp_path / "tasks"
    shutil.copytree(TASKS, task_dir)
    broken = (task_dir / "tiny_choice.yaml").read_text().replace("task: tiny_choice", "task: broken_choice")
    (task_dir / "broken_choice.yaml").write_text(broken.replace("task_data: tiny_choice", "task_data: not_there"))
    return task_dir


def test_lm_eval_tasks_load_one_by_one_so_a_broken_task_is_named(task_dir_with_a_broken_task):
    manager = task_manager(task_dir_with_a_broken_task)
    loaded, failed = load_lm_eval_tasks(manager, ["tiny_choice", "broken_choice", "tiny_lambada"])
    assert sorted(loaded) == ["tiny_choice", "tiny_lambada"] and list(failed) == ["broken_choice"]
    with pytest.raises(ValueError, match=r"lm-eval task\(s\) \['broken_choice'\] failed to load"):
        check_scored_output_types(manager, ["tiny_choice", "broken_choice"])
    with pytest.raises(ValueError, match=r"prefetch: lm-eval task broken_choice failed \(FileNotFoundError: "):
        prefetch_task("broken_choice", str(task_dir_with_a_broken_task), {})
    assert prefetch_task("tiny_choice", str(task_dir_with_a_broken_task), {}) == {"task": "tiny_choice", "datasets": []}
