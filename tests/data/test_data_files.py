"""JSONL reading/writing and atomic output directories."""

import gzip

import pytest

from pipeline.data.files import atomic_directory, iter_jsonl, iter_texts, sha256_file, staging_directory, write_jsonl


def test_write_then_read_round_trip(tmp_path):
    texts = ["plain", "ünïcödé – “quotes”", "line\nbreaks\tand tabs", "\u2028 separator"]
    stats = write_jsonl(tmp_path / "a.jsonl", texts)
    assert stats == {"documents": 4, "characters": sum(map(len, texts))}
    assert list(iter_texts([tmp_path / "a.jsonl"])) == texts
    raw = (tmp_path / "a.jsonl").read_bytes()
    assert raw.isascii() and raw.count(b"\n") == 4


def test_gzip_output_is_deterministic(tmp_path):
    write_jsonl(tmp_path / "a.jsonl.gz", ["x", "y"], compresslevel=9)
    write_jsonl(tmp_path / "b.jsonl.gz", ["x", "y"], compresslevel=9)
    assert sha256_file(tmp_path / "a.jsonl.gz") == sha256_file(tmp_path / "b.jsonl.gz")
    assert list(iter_texts([tmp_path / "a.jsonl.gz"])) == ["x", "y"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.jsonl.gz", "b.jsonl.gz"]  # no temporary left


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl does not exist; expected a JSONL file"):
        list(iter_jsonl(tmp_path / "nope.jsonl"))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"text": "ok"}\n{"text": "broken\n', r"line 2: not valid JSON"),
        ('{"text": "ok"}\n\n{"text": "ok"}\n', r"line 2: not valid JSON"),
        ('{"text": "ok"}\n{"body": "no text"}\n', r"line 2: has no string field 'text'"),
        ('{"text": 3}\n', r"line 1: has no string field 'text'"),
        ('["text"]\n', r"line 1: has no string field 'text'"),
        ("", r"contains no documents"),
    ],
)
def test_bad_jsonl_names_file_line_and_key(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError, match=message) as error:
        list(iter_jsonl(path))
    assert str(path) in str(error.value)


def test_corrupt_gzip_and_bad_utf8(tmp_path):
    (tmp_path / "bad.jsonl.gz").write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match=r"bad\.jsonl\.gz, after line 0: cannot be decoded"):
        list(iter_jsonl(tmp_path / "bad.jsonl.gz"))
    (tmp_path / "latin.jsonl").write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(ValueError, match=r"latin\.jsonl, line 2: not UTF-8"):
        list(iter_jsonl(tmp_path / "latin.jsonl"))
    with gzip.open(tmp_path / "truncated.jsonl.gz", "wb") as f:
        f.write(b'{"text": "ok"}\n' * 1000)
    data = (tmp_path / "truncated.jsonl.gz").read_bytes()
    (tmp_path / "truncated.jsonl.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="cannot be decoded"):
        list(iter_jsonl(tmp_path / "truncated.jsonl.gz"))


def test_atomic_directory_success_failure_and_overwrite(tmp_path):
    out = tmp_path / "out"
    with atomic_directory(out) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".out.partial-")
        (tmp / "f").write_text("1")
    assert (out / "f").read_text() == "1"

    with pytest.raises(FileExistsError, match="already exists; expected a new path"):
        with atomic_directory(out):
            pass

    with pytest.raises(RuntimeError, match="boom"):
        with atomic_directory(out, overwrite=True) as tmp:
            (tmp / "f").write_text("2")
            raise RuntimeError("boom")
    assert (out / "f").read_text() == "1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]

    with atomic_directory(out, overwrite=True) as tmp:
        (tmp / "g").write_text("3")
    assert sorted(p.name for p in out.iterdir()) == ["g"]


def test_a_resumable_atomic_directory_keeps_what_a_failed_build_finished_for_its_rerun(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="stopped"):
        with atomic_directory(out, resumable=True) as staging:
            (staging / "finished").write_text("1")
            raise RuntimeError("stopped")
    assert not out.exists() and (staging_directory(out) / "finished").read_text() == "1"
    with atomic_directory(out, resumable=True) as staging:
        assert (staging / "finished").read_text() == "1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
