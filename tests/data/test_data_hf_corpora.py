"""Paper-preset corpus export, exercised offline on local JSONL and save_to_disk data."""

import json

import datasets
import pytest
from levanter.data.sharded_datasource import UrlDataSource

from pipeline.config import load_preset
from pipeline.data.files import iter_texts, write_jsonl
from pipeline.data.hf_corpora import export_hf_corpus

DOCS = [f"Document number {i}: some words." for i in range(60)]


def _export(tmp_path, source, name="out", **kwargs):
    kwargs.setdefault("validation_fraction", None)
    kwargs.setdefault("seed", 0)
    return export_hf_corpus("toy", tmp_path / name, source=source, cache_dir=tmp_path / "hf_cache", **kwargs)


def test_the_paper_preset_splits_its_corpora_as_the_paper():
    """docs/paper.md: WikiText-103 brings its own validation and test splits; OpenWebText's validation split is carved
    from its train split as the authors' code does (0.05 %, shuffled with seed 2357)."""
    sources = {name: dataset["source"] for name, dataset in load_preset({"preset": "paper"})["datasets"].items()}
    assert sources["wt103"] == {"kind": "hf", "id": "dlwh/wikitext_103_detokenized", "test_split": True}
    owt = sources["owt"]
    assert (owt["id"], owt["validation_fraction"], owt["seed"]) == ("Skylion007/openwebtext", 0.0005, 2357)


def test_own_splits_from_local_folder(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    write_jsonl(src / "train-00000.jsonl.gz", DOCS[:25], compresslevel=1)
    write_jsonl(src / "train-00001.jsonl.gz", DOCS[25:50] + ["   "], compresslevel=1)
    write_jsonl(src / "validation.jsonl", DOCS[50:])
    (src / "manifest.json").write_text("{}")
    stats = _export(tmp_path, src, docs_per_shard=20)
    assert [stats["train"][k] for k in ("documents", "dropped_blank")] == [50, 1]
    assert [p.rsplit("/", 1)[1] for p in stats["train"]["files"]] == [
        "train-00000.jsonl.gz",
        "train-00001.jsonl.gz",
        "train-00002.jsonl.gz",
    ]
    assert list(iter_texts(stats["train"]["files"])) == DOCS[:50]
    assert list(iter_texts(stats["validation"]["files"])) == DOCS[50:]
    assert json.loads((tmp_path / "out" / "manifest.json").read_text()) == stats
    levanter_docs = list(UrlDataSource(stats["train"]["files"]))
    assert [d["text"] for d in levanter_docs] == DOCS[:50]


def test_the_sources_own_test_split_is_exported_when_asked(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    write_jsonl(src / "train.jsonl", DOCS[:40])
    write_jsonl(src / "validation.jsonl", DOCS[40:50])
    write_jsonl(src / "test.jsonl", DOCS[50:])
    stats = _export(tmp_path, src, test_split=True)
    assert list(iter_texts(stats["test"]["files"])) == DOCS[50:]
    assert list(iter_texts(stats["validation"]["files"])) == DOCS[40:50]
    assert "test" not in _export(tmp_path, src, name="no-test")
    (src / "test.jsonl").unlink()
    with pytest.raises(
        ValueError,
        match=r"^Dataset 'toy' has splits \['train', 'validation'\]; expected "
        r"\['train', 'validation', 'test'\]",
    ):
        _export(tmp_path, src, name="missing", test_split=True)
    with pytest.raises(
        ValueError,
        match=r"test_split=true with validation_fraction=0.1; a test split must be the "
        r"source's own",
    ):
        _export(tmp_path, src / "train.jsonl", name="carved", validation_fraction=0.1, test_split=True)


def test_fraction_split_matches_reference_recipe(tmp_path):
    write_jsonl(tmp_path / "owt.jsonl", DOCS)
    stats = _export(tmp_path, tmp_path / "owt.jsonl", validation_fraction=0.1, seed=2357)
    reference = datasets.Dataset.from_dict({"text": DOCS}).train_test_split(test_size=0.1, seed=2357, shuffle=True)
    assert list(iter_texts(stats["validation"]["files"])) == reference["test"]["text"]
    assert list(iter_texts(stats["train"]["files"])) == reference["train"]["text"]
    assert stats["validation"]["documents"] == 6
    again = _export(tmp_path, tmp_path / "owt.jsonl", name="again", validation_fraction=0.1, seed=2357)
    assert list(iter_texts(again["validation"]["files"])) == reference["test"]["text"]


def test_a_save_to_disk_source_without_a_text_column_is_named(tmp_path):
    data = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"content": DOCS[:40], "id": list(range(40))}),
            "validation": datasets.Dataset.from_dict({"content": DOCS[40:], "id": list(range(20))}),
        }
    )
    data.save_to_disk(str(tmp_path / "saved"))
    with pytest.raises(
        ValueError, match=r"split 'train' has columns \['content', 'id'\]; expected a string column 'text'"
    ):
        _export(tmp_path, tmp_path / "saved")


def test_missing_validation_split(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", DOCS)
    with pytest.raises(ValueError, match=r"has splits \['train'\]; expected \['train', 'validation'\]"):
        _export(tmp_path, tmp_path / "train.jsonl")


def test_a_bad_local_jsonl_is_named_and_nothing_exported(tmp_path):
    """What a bad JSONL file is named for: tests/data/test_data_files.py."""
    (tmp_path / "bad.jsonl").write_text('{"text": "a"}\n{"text": "b"\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl, line 2: not valid JSON"):
        _export(tmp_path, tmp_path / "bad.jsonl", validation_fraction=0.1)
    assert not (tmp_path / "out").exists()


def test_empty_and_blank_corpora(tmp_path):
    datasets.Dataset.from_dict({"text": ["  ", "\n", ""]}).save_to_disk(str(tmp_path / "blank"))
    with pytest.raises(ValueError, match="split 'train' has no non-blank documents"):
        _export(tmp_path, tmp_path / "blank", validation_fraction=0.34)
    assert not list(tmp_path.glob(".out.partial-*"))
    datasets.Dataset.from_dict({"text": ["only one"]}).save_to_disk(str(tmp_path / "one"))
    with pytest.raises(ValueError, match="split 'train' has 1 documents; expected at least 2"):
        _export(tmp_path, tmp_path / "one", validation_fraction=0.1)
    none = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"text": ["ok", None, "ok"]}),
            "validation": datasets.Dataset.from_dict({"text": ["fine"]}),
        }
    )
    none.save_to_disk(str(tmp_path / "none"))
    with pytest.raises(ValueError, match="split 'train', row 1: field 'text' is NoneType; expected a string"):
        _export(tmp_path, tmp_path / "none")


def test_missing_sources(tmp_path):
    with pytest.raises(FileNotFoundError, match="local source .*nothing.jsonl does not exist"):
        _export(tmp_path, str(tmp_path / "nothing.jsonl"))
    (tmp_path / "emptydir").mkdir()
    with pytest.raises(ValueError, match="holds no .jsonl or .jsonl.gz files"):
        _export(tmp_path, tmp_path / "emptydir")
    write_jsonl(tmp_path / "t.jsonl", DOCS)
    with pytest.raises(ValueError, match=r"validation_fraction=1.5; expected 0 < f < 1"):
        _export(tmp_path, tmp_path / "t.jsonl", validation_fraction=1.5)
