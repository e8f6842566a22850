"""The online prefetch against a local Hugging Face hub mirror (the site's ``hf_endpoint``), then the offline compute
paths reading what it fetched: the pinned commit of each dataset and tokenizer, never another one in the cache."""

import hashlib
import io
import json
import logging
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from cli_testkit import ROOT, example_site, pipeline_verb, snakemake_run
from tokenizers import Tokenizer

from pipeline.config.site import EXAMPLE, load_site
from pipeline.data.files import iter_texts, write_jsonl
from pipeline.data.tokenizer import train_bpe_tokenizer

PRESET = "mirror"
logger = logging.getLogger(__name__)


def parquet_table_bytes(columns: dict[str, list]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()


def parquet_bytes(texts: list[str]) -> bytes:
    return parquet_table_bytes({"text": texts})


class HubMirror(ThreadingHTTPServer):
    """The part of the hub's HTTP API that huggingface_hub, datasets and transformers call to fetch a repository at a
    revision: repository info, tree listings and file resolution (``X-Repo-Commit``, ``ETag``). A
    repository is a list of commits (each a {path: bytes} snapshot) and named refs; a request this mirror does not
    implement is logged and recorded in ``unknown``."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), MirrorRequest)
        self.repos: dict[tuple[str, str], dict] = {}
        self.unknown: list[str] = []

    def start(self) -> None:
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Stop serving and close the port (twice is fine)."""
        if self.socket.fileno() != -1:
            self.shutdown()
            self.server_close()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def commit(self, kind: str, repo_id: str, files: dict[str, bytes], refs: tuple[str, ...] = ("main",)) -> str:
        """Add a commit holding ``files`` to a ``kind`` ("model" or "dataset") repository, point ``refs`` at it and
        return its id."""
        digest = hashlib.sha1(repo_id.encode())
        for path in sorted(files):
            digest.update(path.encode() + b"\0" + files[path])
        sha = digest.hexdigest()
        repo = self.repos.setdefault((kind, repo_id), {"commits": {}, "refs": {}})
        repo["commits"][sha] = files
        repo["refs"].update(dict.fromkeys(refs, sha))
        return sha


class MirrorRequest(BaseHTTPRequestHandler):
    server: HubMirror

    def log_message(self, format, *args):  # noqa: A002 - the name http.server calls
        logger.debug("mirror: " + format, *args)

    def do_HEAD(self):
        self.route(body=False)

    def do_GET(self):
        self.route(body=True)

    def route(self, body: bool):
        url = urlsplit(self.path)
        parts = [unquote(part) for part in url.path.strip("/").split("/")]
        self.query = parse_qs(url.query)
        if parts[:1] == ["api"] and len(parts) == 4 and parts[1] in ("models", "datasets"):  # info at main
            kind, repo_id, revision, rest, handler = parts[1][:-1], "/".join(parts[2:4]), "main", [], self.info
        elif parts[:1] == ["api"] and len(parts) >= 6 and parts[1] in ("models", "datasets"):
            kind, repo_id, verb, revision, rest = parts[1][:-1], "/".join(parts[2:4]), parts[4], parts[5], parts[6:]
            handler = {"revision": self.info, "tree": self.tree}.get(verb)
        elif "resolve" in parts[:4]:
            kind = "dataset" if parts[0] == "datasets" else "model"
            parts = parts[1:] if kind == "dataset" else parts
            repo_id, verb, revision, rest = "/".join(parts[:2]), parts[2], parts[3], parts[4:]
            handler = self.resolve if verb == "resolve" else None
        else:
            handler = None
        if handler is None:
            self.server.unknown.append(f"{self.command} {self.path}")
            logger.warning("hub mirror: no such endpoint: %s %s", self.command, self.path)
            return self.reply(404, b"", body, {"X-Error-Code": "EntryNotFound"})
        repo = self.server.repos.get((kind, repo_id))
        if repo is None:
            return self.reply(404, b"", body, {"X-Error-Code": "RepoNotFound"})
        sha = repo["refs"].get(revision, revision if revision in repo["commits"] else None)
        if sha is None:
            return self.reply(404, b"", body, {"X-Error-Code": "RevisionNotFound"})
        handler(repo_id, sha, repo["commits"][sha], "/".join(rest), body)

    def reply(
        self,
        status: int,
        content: bytes,
        body: bool,
        headers: dict[str, str] | None = None,
        content_type: str = "application/octet-stream",
    ):
        self.send_response(status)
        for name, value in {
            "Content-Type": content_type,
            "Content-Length": str(len(content)),
            **(headers or {}),
        }.items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(content)

    def reply_json(self, value, body: bool):
        self.reply(200, json.dumps(value).encode(), body, content_type="application/json")

    def info(self, repo_id, sha, files, _rest, body):
        self.reply_json(
            {
                "id": repo_id,
                "sha": sha,
                "private": False,
                "disabled": False,
                "gated": False,
                "lastModified": "2026-01-01T00:00:00.000Z",
                "tags": [],
                "downloads": 0,
                "likes": 0,
                "siblings": [{"rfilename": path} for path in sorted(files)],
            },
            body,
        )

    def tree(self, _repo_id, _sha, files, folder, body):
        """The files and folders in ``folder`` (everything below it with ``recursive``); a missing folder is 404, as on
        the hub."""
        recursive = self.query.get("recursive", ["false"])[0].lower() == "true"
        prefix = f"{folder}/" if folder else ""
        names = [path[len(prefix) :].split("/") for path in files if path.startswith(prefix)]
        if not names:
            return self.reply(404, b"", body, {"X-Error-Code": "EntryNotFound"})
        listed = {
            (prefix + "/".join(parts[:depth]), depth == len(parts))
            for parts in names
            for depth in range(1, len(parts) + 1 if recursive else 2)
        }
        self.reply_json(
            [
                {"type": "file", "path": path, "size": len(files[path]), "oid": hashlib.sha1(files[path]).hexdigest()}
                if is_file
                else {"type": "directory", "path": path, "size": 0, "oid": hashlib.sha1(path.encode()).hexdigest()}
                for path, is_file in sorted(listed)
            ],
            body,
        )

    def resolve(self, _repo_id, sha, files, path, body):
        if path not in files:
            return self.reply(404, b"", body, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": sha})
        content = files[path]
        self.reply(200, content, body, {"X-Repo-Commit": sha, "ETag": f'"{hashlib.sha1(content).hexdigest()}"'})


@pytest.fixture
def hub_mirror():
    mirror = HubMirror()
    mirror.start()
    yield mirror
    mirror.stop()


def texts(tag: str, split: str, count: int) -> list[str]:
    return [f"{tag} {split} document {i}: words, more words and {i * 7} other words." for i in range(count)]


def corpus_commit(tag: str) -> dict[str, bytes]:
    """A dataset repository as `push_to_hub` lays it out: data/<split>-00000-of-00001.parquet."""
    return {
        f"data/{split}-00000-of-00001.parquet": parquet_bytes(texts(tag, split, count))
        for split, count in (("train", 20), ("validation", 4), ("test", 4))
    }


def tokenizer_commit(tmp_path: Path, vocab_size: int) -> dict[str, bytes]:
    corpus = tmp_path / "tokenizer-corpus.jsonl"
    write_jsonl(corpus, texts("tokenizer", "train", 200))
    out = tmp_path / f"tokenizer-{vocab_size}"
    train_bpe_tokenizer([corpus], vocab_size, out)
    return {path.name: path.read_bytes() for path in out.iterdir()}


def mirror_preset(tmp_path: Path, mirror: HubMirror, sources: dict[str, dict], **sections) -> tuple[Path, Path]:
    """The tiny preset as ``PRESET``, its datasets' ``sources`` read from the mirror's ``local/tiny-corpus`` and
    ``sections`` ({section: {key: value}}) merged in, and the example site naming the mirror and the test's cache:
    their paths."""
    preset = yaml.safe_load((ROOT / "pipeline" / "config" / "presets" / "tiny.yaml").read_text())
    preset["preset"] = PRESET
    for name, source in sources.items():
        preset["datasets"][name]["source"] = {"kind": "hf", "id": "local/tiny-corpus", **source}
    for section, values in sections.items():
        preset[section].update(values)
    (tmp_path / "preset.yaml").write_text(yaml.safe_dump(preset))
    site = example_site(tmp_path / "site.yaml", hf_home=str(tmp_path / "hf"), hf_endpoint=mirror.endpoint)
    return tmp_path / "preset.yaml", site


def test_the_site_hub_mirror_defaults_to_the_hub_and_must_be_a_url(tmp_path):
    assert load_site(EXAMPLE).hf_endpoint is None
    with pytest.raises(ValueError, match=r"key 'site.hf_endpoint' must match '\^https\?://' \(got 'hf-mirror.org'\)"):
        load_site(example_site(tmp_path / "site.yaml", hf_endpoint="hf-mirror.org"))


def run_snakemake(workdir: Path, preset: Path, site: Path, *targets: str, keep_going: bool = False) -> str:
    """Snakemake's output; it must succeed unless ``keep_going`` (then the jobs that can run do)."""
    result = snakemake_run(
        workdir,
        "--cores",
        "1",
        "--show-failed-logs",
        *targets,
        *(["--keep-going"] if keep_going else []),
        "--config",
        f"preset={preset}",
        f"site={site}",
    )
    assert keep_going or result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return result.stdout + result.stderr


def prefetch_directly(tmp_path: Path, mirror: HubMirror, item: dict, out: Path) -> subprocess.CompletedProcess:
    """`python -m pipeline prefetch` of dataset ``item`` from ``mirror`` into the test's cache, as another preset
    would."""
    env = {
        "HF_HOME": str(tmp_path / "hf"),
        "HF_ENDPOINT": mirror.endpoint,
        "HF_HUB_OFFLINE": "0",
        "HF_DATASETS_OFFLINE": "0",
    }
    return pipeline_verb("prefetch", "--dataset", json.dumps(item), "--out", str(out), env=env, timeout=300)


@pytest.mark.slow
def test_the_prefetch_rule_fetches_from_the_site_mirror_and_offline_jobs_read_the_pinned_commits(tmp_path, hub_mirror):
    """The site names the mirror (hf_endpoint) and the cache (hf_home). The dataset repository has three commits:
    `old` (pinned by commit, as WikiText-103), `new` (main, pinned by nobody) and a parquet conversion on the branch
    refs/convert/parquet (as OpenWebText); the tokenizer repository an old pinned commit and a newer main. After the
    prefetch the mirror goes away: the compute jobs read the cache with the hub offline and get each item at its
    pinned commit, although the cache holds two revisions of one dataset repository (as when presets, or a preset
    before and after a new pin, share the site's cache), and although another preset's later prefetch moved the cache's
    parquet branch to a newer commit: a job reads the commit its own preset's prefetch recorded."""
    old = hub_mirror.commit("dataset", "local/tiny-corpus", corpus_commit("old"))
    hub_mirror.commit("dataset", "local/tiny-corpus", corpus_commit("new"))
    parquet_branch = {
        f"default/train/000{shard}.parquet": parquet_bytes(texts("parquet", f"shard{shard}", 10)) for shard in range(2)
    }
    converted = hub_mirror.commit("dataset", "local/tiny-corpus", parquet_branch, refs=("refs/convert/parquet",))
    old_tokenizer = hub_mirror.commit("model", "local/tiny-tokenizer", tokenizer_commit(tmp_path, 300))
    hub_mirror.commit("model", "local/tiny-tokenizer", tokenizer_commit(tmp_path, 320))

    sources = {
        "wt103": {"revision": old, "test_split": True},
        "owt": {"revision": "refs/convert/parquet", "validation_fraction": 0.1, "seed": 1},
    }
    tokenizer = {"kind": "pretrained", "name": "local/tiny-tokenizer", "revision": old_tokenizer}
    preset, site = mirror_preset(tmp_path, hub_mirror, sources, tokenizers={"hub": tokenizer})
    workdir, data = tmp_path / "work", tmp_path / "work" / "results" / PRESET / "data"

    run_snakemake(workdir, preset, site, "prefetch")
    assert not hub_mirror.unknown, f"requests the mirror does not implement: {hub_mirror.unknown}"
    records = {
        path.relative_to(data / "prefetch").as_posix(): json.loads(path.read_text())
        for path in (data / "prefetch").rglob("*.json")
    }
    assert records == {
        "datasets/owt.json": {
            "name": "owt",
            "id": "local/tiny-corpus",
            "revision": "refs/convert/parquet",
            "commit": converted,
        },
        "datasets/wt103.json": {"name": "wt103", "id": "local/tiny-corpus", "revision": old, "commit": old},
        "tokenizers/hub.json": {
            "name": "hub",
            "id": "local/tiny-tokenizer",
            "revision": old_tokenizer,
            "commit": old_tokenizer,
        },
    }

    # The hub moves the parquet branch; another preset sharing the site's cache prefetches it: the cache's ref now
    # names the new commit, the first preset's record still the one it fetched.
    moved = hub_mirror.commit(
        "dataset",
        "local/tiny-corpus",
        {"default/train/0000.parquet": parquet_bytes(texts("moved", "shard0", 10))},
        refs=("refs/convert/parquet",),
    )
    owt_item = {"name": "owt", "id": "local/tiny-corpus", "revision": "refs/convert/parquet"}
    other = prefetch_directly(tmp_path, hub_mirror, owt_item, tmp_path / "other-preset.json")
    assert other.returncode == 0, other.stderr[-3000:]
    assert json.loads((tmp_path / "other-preset.json").read_text()) == {**owt_item, "commit": moved}
    assert (
        tmp_path / "hf" / "hub" / "datasets--local--tiny-corpus" / "refs" / "refs" / "convert" / "parquet"
    ).read_text() == moved

    hub_mirror.stop()
    unreachable = prefetch_directly(tmp_path, hub_mirror, owt_item, tmp_path / "again.json")
    assert (
        unreachable.returncode == 1
        and "error: prefetch: dataset owt (local/tiny-corpus@refs/convert/parquet) failed (ConnectionError"
        in unreachable.stderr
    ), unreachable.stderr[-3000:]
    assert not (tmp_path / "again.json").exists()

    corpora = (f"results/{PRESET}/data/corpora/{name}" for name in ("wt103", "owt"))
    run_snakemake(workdir, preset, site, *corpora, f"results/{PRESET}/data/tokenizers/hub")
    for split in ("train", "validation", "test"):
        assert list(iter_texts(sorted((data / "corpora" / "wt103").glob(f"{split}-*.jsonl.gz")))) == texts(
            "old", split, 20 if split == "train" else 4
        )
    owt = sorted(iter_texts(sorted((data / "corpora" / "owt").glob("*.jsonl.gz"))))
    assert owt == sorted(texts("parquet", "shard0", 10) + texts("parquet", "shard1", 10))
    assert json.loads((data / "corpora" / "owt" / "manifest.json").read_text())["revision"] == converted
    assert Tokenizer.from_file(str(data / "tokenizers" / "hub" / "tokenizer.json")).get_vocab_size() == 300


CHOICE_TASK = """task: {task}
dataset_path: {dataset}
output_type: multiple_choice
test_split: test
doc_to_text: context
doc_to_choice: choices
doc_to_target: label
metric_list:
  - metric: acc
"""


def choice_docs(tag: str) -> bytes:
    return parquet_table_bytes(
        {
            "context": [f"{tag} question {i}" for i in range(3)],
            "choices": [["yes", "no"]] * 3,
            "label": [i % 2 for i in range(3)],
        }
    )


LOAD_TASKS = """import json, sys
from pathlib import Path
from pipeline.evaluate.lm_eval_tasks import task_manager
from pipeline.evaluate.task_sources import pin_task_datasets, recorded_source
task_dir, records, names = sys.argv[1], [Path(p) for p in sys.argv[2].split(",")], sys.argv[3].split(",")
manager = pin_task_datasets(task_manager(task_dir), recorded_source(records))
tasks = manager.load(names)["tasks"]
print(json.dumps({name: [doc["context"] for doc in task.test_docs()] for name, task in tasks.items()}))
"""


@pytest.mark.slow
def test_a_failing_lm_eval_task_leaves_pretraining_runnable_and_tasks_read_their_pinned_or_parquet_commit(
    tmp_path, hub_mirror
):
    """Three lm-eval tasks of a local task folder read hub datasets: `pinned` a dataset with an old commit (pinned in
    downstream.revisions) and a newer main; `converted` a loading script with a parquet conversion; `script_only` a
    loading script without one. With --keep-going the prefetch refuses `script_only` by name, and the corpus job of a
    hub dataset still runs (it needs only its own record). Offline, the downstream's task loading reads `pinned` at
    the old commit and `converted` from its parquet branch."""
    wt103 = hub_mirror.commit("dataset", "local/tiny-corpus", corpus_commit("old"))
    old = hub_mirror.commit("dataset", "local/pinned", {"data/test-00000-of-00001.parquet": choice_docs("old")})
    hub_mirror.commit("dataset", "local/pinned", {"data/test-00000-of-00001.parquet": choice_docs("new")})
    hub_mirror.commit("dataset", "local/converted", {"converted.py": b"# a loading script"})
    parquet = hub_mirror.commit(
        "dataset",
        "local/converted",
        {"default/test/0000.parquet": choice_docs("parquet")},
        refs=("refs/convert/parquet",),
    )
    hub_mirror.commit("dataset", "local/script_only", {"script_only.py": b"# a loading script"})
    task_dir = tmp_path / "tasks"
    task_dir.mkdir()
    for task in ("pinned", "converted", "script_only"):
        (task_dir / f"{task}.yaml").write_text(CHOICE_TASK.format(task=task, dataset=f"local/{task}"))

    downstream = {"task_dir": str(task_dir), "tasks": ["pinned", "converted", "script_only"]}
    sources = {"wt103": {"revision": wt103, "test_split": True}}
    preset, site = mirror_preset(
        tmp_path, hub_mirror, sources, downstream={**downstream, "revisions": {"local/pinned": old}}
    )
    workdir = tmp_path / "work"
    results = workdir / "results" / PRESET

    output = run_snakemake(workdir, preset, site, "prefetch", f"results/{PRESET}/data/corpora/wt103", keep_going=True)
    assert not hub_mirror.unknown, f"requests the mirror does not implement: {hub_mirror.unknown}"
    assert (results / "data" / "corpora" / "wt103" / "manifest.json").is_file(), output[-4000:]
    records = sorted(path.name for path in (results / "data" / "prefetch" / "lm_eval").iterdir())
    assert records == ["converted.json", "pinned.json"]
    assert json.loads((results / "data" / "prefetch" / "lm_eval" / "converted.json").read_text()) == {
        "task": "converted",
        "datasets": [{"id": "local/converted", "revision": None, "commit": parquet, "converted": True}],
    }
    assert (
        "error: prefetch: lm-eval task script_only failed (ValueError: lm-eval dataset local/script_only@main is "
        "a loading script, which datasets 4 refuses, and has no parquet conversion (refs/convert/parquet); remove "
        "its task from downstream.tasks.)"
    ) in (results / "logs" / "prefetch" / "lm_eval" / "script_only.log").read_text()

    hub_mirror.stop()
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            LOAD_TASKS,
            str(task_dir),
            ",".join(
                str(results / "data" / "prefetch" / "lm_eval" / f"{task}.json") for task in ("pinned", "converted")
            ),
            "pinned,converted",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
    )
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert json.loads(loaded.stdout.splitlines()[-1]) == {
        "pinned": [f"old question {i}" for i in range(3)],
        "converted": [f"parquet question {i}" for i in range(3)],
    }
