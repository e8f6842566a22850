"""The presets declare the paper's grid; malformed presets fail with one sentence naming file and key."""

import os
import re
from pathlib import Path

import pytest

import pipeline.config
from pipeline.config import (
    SCHEMA_PATH,
    ConfigError,
    RunSpec,
    check_inside_results,
    finetune_runs,
    load_preset,
    memory_probes,
    pretrain_runs,
)
from pipeline.config.paths import PRESET_DIR

TABLE_ROWS = {  # Tables 1 and 2 of the paper: (dataset, size, family)
    *(("wt103", size, family) for size in ("small", "medium") for family in ("gpt", "shared", "shared_ode", "diffeq")),
    *(("owt", size, family) for size in ("small", "medium", "large") for family in ("gpt", "diffeq")),
    ("owt", "llama1b", "llama"),
    ("owt", "llama1b", "diffeq_llama"),
}


@pytest.mark.parametrize("preset", ["tiny", "paper"])
def test_grid_has_every_row_of_tables_1_and_2_and_the_ablations(preset):
    runs = pretrain_runs(load_preset({"preset": preset}))
    table = {(r.dataset, r.size, r.model.family) for r in runs.values() if r.role == "table"}
    assert table == TABLE_ROWS
    assert {r.run_id for r in runs.values() if r.role == "finetune_source"} == {
        "wt103-ft18-diffeq",
        "owt-ft18-diffeq",
        "wt103-gpt24-gpt",
        "owt-gpt24-gpt",
    }
    ablations = [r for r in runs.values() if r.role == "ablation"]
    assert {r.ablation.split("_")[0] for r in ablations} == {"beta2", "time"}
    assert len([r for r in ablations if r.ablation.startswith("time_embed_dim")]) == (5 if preset == "paper" else 3)


def test_paper_preset_matches_experiment_facts():
    runs = pretrain_runs(load_preset({"preset": "paper"}))
    large = runs["owt-large-diffeq"]
    assert (large.model.hidden_dim, large.model.num_heads, large.model.num_layers) == (1280, 20, 36)
    assert (large.train.batch_size, large.train.steps, large.train.lr) == (256, 40000, 3e-4)
    assert (large.train.beta2, large.train.epsilon, large.model.time_embed_dim) == (0.95, 1e-6, 96)
    assert runs["owt-large-beta2_0.999-gpt"].train.beta2 == 0.999
    assert runs["owt-small-gpt"].train.batch_size == 512
    llama = runs["owt-llama1b-diffeq_llama"]
    assert (llama.model.intermediate_dim, llama.model.sinusoidal_dim, llama.train.weight_decay) == (8192, 256, 1e-5)
    assert runs["wt103-ft18-diffeq"].model.num_layers == 18 and runs["wt103-ft18-diffeq"].model.time_embed_dim == 100
    d_sweep = sorted(
        r.model.time_embed_dim
        for r in runs.values()
        if r.group == "owt-large" and r.model.family == "diffeq" and not (r.ablation or "").startswith("beta2")
    )
    assert d_sweep == [20, 48, 72, 96, 120, 144]
    assert runs["owt-small-gpt"].model.time_embed_dim is None


@pytest.mark.parametrize("preset", ["tiny", "paper"])
def test_fine_tunes_are_scored_on_the_targets_test_split_where_it_has_one(preset):
    """docs/paper.md#fine-tune-test-split: OWT → WikiText-103 on its test split; OWT has none, so WT103 → OWT on
    validation."""
    config = load_preset({"preset": preset})
    runs = finetune_runs(config, pretrain_runs(config))
    splits = {(spec.target_dataset, spec.eval_split) for spec in runs.values()}
    assert splits == {("wt103", "test"), ("owt", "validation")}
    modern_config = load_preset({"preset": preset, "fidelity": {"eval_split": "validation"}})
    modern = finetune_runs(modern_config, pretrain_runs(modern_config))
    assert {spec.eval_split for spec in modern.values()} == {"validation"}


def test_run_spec_round_trips_through_json():
    spec = pretrain_runs(load_preset({"preset": "tiny"}))["owt-llama1b-diffeq_llama"]
    assert RunSpec.from_json(spec.to_json()) == spec


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"bogus": 1}, "unknown key 'bogus' under '<top level>'"),
        ({"pretrain": {"wt103-small": {"trian": {}}}}, "unknown key 'trian' under 'pretrain.wt103-small'"),
        ({"pretrain": {"wt103-small": {"train": {"steps": 0}}}}, "key 'pretrain.wt103-small.train.steps' must be ≥ 1"),
        ({"pretrain": {"wt103-small": {"train": {"steps": -5}}}}, "must be ≥ 1 (got -5)"),
        ({"pretrain": {"wt103-small": {"train": {"lr": "fast"}}}}, "must be of type number (got 'fast')"),
        ({"pretrain": {"wt103-small": {"families": ["gpt", "rnn"]}}}, "must be one of ['gpt', 'shared', 'shared_ode'"),
        ({"pretrain": {"wt103-small": {"size": "huge"}}}, "key 'pretrain.wt103-small.size' is 'huge'"),
        (
            {"datasets": {"wt103": {"source": {"kind": "s3"}}}},
            "'datasets.wt103.source.kind' must be one of ['hf', 'tiny']",
        ),
        ({"ray": {"num_cpus": 0}}, "key 'ray.num_cpus' must be ≥ 1 (got 0)"),
        ({"tracker": ["wandb"]}, "key 'tracker' must contain 'jsonl' (got ['wandb'])"),
        ({"tracker": ["jsonl", "mlflow"]}, "key 'tracker.1' must be one of ['jsonl', 'tensorboard', 'wandb']"),
        ({"downstream": {"pairs": {"x": ["owt-large-gpt", "nope-gpt"]}}}, "names unknown run 'nope-gpt'"),
        ({"ablations": {"beta2": {"base": "owt-huge"}}}, "key 'ablations.beta2.base' is 'owt-huge'"),
        (
            {"sizes": {"llama1b": {"intermediate_dim": None}}},
            "key 'sizes.llama1b.intermediate_dim' must be of type integer",
        ),
        ({"analysis": {"memory": {"base": "owt-huge"}}}, "key 'analysis.memory.base' is 'owt-huge'"),
        ({"pretrain": {"wt103-small": {"families": ["llama"]}}}, "intermediate_dim' is required by the llama run"),
        (
            {"analysis": {"memory": {"families": ["gpt", "llama"]}}},
            "key 'analysis.memory.families' names 'llama', which group 'owt-medium' does not train",
        ),
        ({"analysis": {"memory": {"time_embed_dims": []}}}, "key 'analysis.memory.time_embed_dims'"),
        (
            {"analysis": {"memory": {"families": ["gpt"]}}},
            "key 'analysis.memory.families' is ['gpt']; expected exactly one DiffEqFormer family",
        ),
        # hostile or careless input: shell, paths and regexes only ever see safe identifiers
        (
            {"downstream": {"tasks": ["tiny_choice;touch /tmp/x;#"]}},
            "key 'downstream.tasks.0' must match '^[A-Za-z0-9][A-Za-z0-9_.-]*$' (got 'tiny_choice;touch /tmp/x;#')",
        ),
        (
            {"downstream": {"pairs": {"../../../../tmp/evil": ["owt-large-gpt", "owt-large-diffeq"]}}},
            "key 'downstream.pairs' has an entry named '../../../../tmp/evil'; names must match",
        ),
        (
            {"downstream": {"pairs": {"x(": ["owt-large-gpt", "owt-large-diffeq"]}}},
            "key 'downstream.pairs' has an entry named 'x('",
        ),
        (
            {"datasets": {"owt": {"source": {"kind": "tiny", "corpus": "../../secrets"}}}},
            "key 'datasets.owt.source.corpus' must match",
        ),
        ({"analysis": {"memory": {"base": "owt-medium;rm -rf ~"}}}, "key 'analysis.memory.base' must match"),
        ({"downstream": {"task_dir": "no/such/folder"}}, "key 'downstream.task_dir' is 'no/such/folder', but /"),
        (
            {"downstream": {"task_dir": "../../elsewhere"}},
            "key 'downstream.task_dir' is '../../elsewhere', which leaves the repository",
        ),
        # numbers that are not numbers, and integers that are floats
        (
            {"pretrain": {"wt103-small": {"train": {"lr": "nan"}}}},
            "key 'pretrain.wt103-small.train.lr' must be a finite number (got nan)",
        ),
        ({"pretrain": {"wt103-small": {"train": {"beta2": ".nan"}}}}, "train.beta2' must be a finite number (got nan)"),
        (
            {"pretrain": {"wt103-small": {"train": {"epsilon": "inf"}}}},
            "train.epsilon' must be a finite number (got inf)",
        ),
        ({"pretrain": {"wt103-small": {"train": {"lr": "1e400"}}}}, "train.lr' must be a finite number (got inf)"),
        (
            {"analysis": {"frontier": {"step_factors": ["inf", "nan"]}}},
            "key 'analysis.frontier.step_factors.0' must be a finite number (got inf)",
        ),
        (
            {"pretrain": {"wt103-small": {"train": {"steps": "1e3"}}}},
            "key 'pretrain.wt103-small.train.steps' must be an integer (got 1000.0; an integral float such as 8.0 or "
            "1e3 is refused, not rounded: write 1000)",
        ),
        (
            {"pretrain": {"wt103-small": {"train": {"batch_size": 8.0}}}},
            "key 'pretrain.wt103-small.train.batch_size' must be an integer (got 8.0;",
        ),
        ({"xla_flags": "--xla_dump_to=/tmp/x; rm -rf ~"}, "key 'xla_flags' must match"),
        ({"xla_flags": "-O3"}, "key 'xla_flags' must match"),
        ({"cache_builder": "parallel"}, "key 'cache_builder' must be one of ['serial', 'ray'] (got 'parallel')"),
        (
            {"analysis": {"clustering": {"regimes": {"equal-mean": {"role": "claim"}}}}},
            "key 'analysis.clustering.regimes' has 2 regimes with role 'claim' (['authors', 'equal-mean']); "
            "give exactly "
            "one regime that role",
        ),
        (
            {"analysis": {"clustering": {"regimes": {"authors": {"dt": 30}}}}},
            "key 'analysis.clustering.regimes.authors.dt' is 30, larger than its horizon 20; give a step dt <= horizon",
        ),
        (
            {"analysis": {"clustering": {"regimes": {"authors": {"magnitude": "cubic"}}}}},
            "key 'analysis.clustering.regimes.authors.magnitude' must be one of",
        ),
        (
            {"analysis": {"lyapunov": {"output_token": 999}}},
            "key 'analysis.lyapunov.output_token' is 999; run 'owt-medium-diffeq' reads at most seq_len=64 tokens, "
            "so expected -64 to 63",
        ),
    ],
)
def test_bad_preset_fails_with_one_sentence(override, expected):
    with pytest.raises(ConfigError) as error:
        load_preset({"preset": "tiny", **override})
    message = str(error.value)
    assert expected in message
    assert message.startswith(str(PRESET_DIR / "tiny.yaml"))
    assert "\n" not in message


def test_a_preset_file_must_not_take_a_builtin_presets_name_and_results_folder(tmp_path):
    """A copy of tiny.yaml with one lr changed would rerun into, and overwrite, results/tiny: refused."""
    tiny = (PRESET_DIR / "tiny.yaml").read_text()
    copy = tmp_path / "copy-of-tiny.yaml"
    copy.write_text(tiny.replace("lr: 6.0e-3", "lr: 1.0e-3", 1))
    with pytest.raises(ConfigError) as error:
        load_preset({"preset": str(copy)})
    assert str(error.value) == (
        f"{copy}: key 'preset' is 'tiny', the built-in preset whose results are in results/tiny/, but key "
        f"'pretrain.wt103-small.train.lr' differs from {PRESET_DIR / 'tiny.yaml'}; give this file its own preset name "
        f"(e.g. preset: my_tiny) so that its results get their own folder."
    )
    copy.write_text(tiny.replace("    full: {}\n", "", 1))  # an empty mapping left out differs too: no full fine-tunes
    with pytest.raises(ConfigError, match="but key 'finetune.methods.full' differs"):
        load_preset({"preset": str(copy)})
    same = tiny.replace("    epsilon: 1.0e-8\n", "    epsilon: 1.0e-8\n    micro_batch_size: null\n", 1)
    for copied in (tiny, same):  # a key set to null reads as one left out
        copy.write_text(copied)
        assert load_preset({"preset": str(copy)})["preset"] == "tiny"
    copy.write_text(tiny.replace("preset: tiny", "preset: my_tiny").replace("lr: 6.0e-3", "lr: .nan", 1))
    with pytest.raises(ConfigError, match=r"key 'pretrain.wt103-small.train.lr' must be a finite number \(got nan\)"):
        load_preset({"preset": str(copy)})


def test_outputs_outside_the_results_folder_are_refused():
    check_inside_results("results/tiny", ["results/tiny/tables/downstream_x.md", "results/tiny/./a/../b.csv"])
    with pytest.raises(
        ConfigError,
        match=r"^results/tiny/tables/\.\./\.\./\.\./tmp/evil\.md: this output of preset "
        r"'tiny' lies outside results/tiny/",
    ):
        check_inside_results("results/tiny", ["results/tiny/tables/../../../tmp/evil.md"])
    with pytest.raises(ConfigError):
        check_inside_results("results/tiny", ["results/tiny-other/x.csv"])


def test_unknown_preset_names_the_choices():
    choices = r"expected one of \['mini', 'paper', 'tiny'\]"
    with pytest.raises(ConfigError, match=rf"key 'preset' names no preset file; {choices}"):
        load_preset({"preset": "nope"})


def test_nested_command_line_overrides_get_their_yaml_types():
    """`snakemake --config 'pretrain={wt103-small: {train: {steps: 6}}}'` hands every nested leaf over as a
    string; the preset must still validate and take the number."""
    config = load_preset(
        {
            "preset": "tiny",
            "pretrain": {"wt103-small": {"train": {"steps": "6", "lr": "1e-3"}}},
            "ray": {"address": "127.0.0.1:6379", "num_cpus": "null"},
        }
    )
    run = pretrain_runs(config)["wt103-small-gpt"]
    assert (run.train.steps, run.train.lr) == (6, 1e-3)
    assert config["ray"] == {"address": "127.0.0.1:6379", "num_cpus": None}


def test_memory_probes_take_the_base_shape_at_the_probe_batch_once_per_d():
    """Fig. 16 at the paper preset: GPT-medium's shape at batch 256, DiffEqFormer once per D, one GPT baseline."""
    config = load_preset({"preset": "paper"})
    probes = memory_probes(config)
    base = pretrain_runs(config)["owt-medium-diffeq"]
    dims = [20, 48, 72, 96, 120, 144]
    assert list(probes) == ["owt-medium-memory-gpt", *[f"owt-medium-memory_d{d}-diffeq" for d in dims]]
    for probe_id, spec in probes.items():
        assert spec.train.batch_size == 256 and spec.role == "memory_probe"
        assert (spec.model.hidden_dim, spec.model.num_layers, spec.model.seq_len) == (1024, 24, 1024), probe_id
    assert [probes[f"owt-medium-memory_d{d}-diffeq"].model.time_embed_dim for d in dims] == dims
    assert probes["owt-medium-memory_d96-diffeq"].model == base.model
    assert not set(probes) & set(pretrain_runs(config))


def test_xla_flags_reach_every_job_before_the_users_own(monkeypatch):
    from pipeline.execution.job_env import export_xla_flags

    assert load_preset({"preset": "tiny"})["xla_flags"] == "--xla_backend_optimization_level=1"
    assert load_preset({"preset": "paper"})["xla_flags"] == ""
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=3")
    export_xla_flags("--xla_backend_optimization_level=1 --xla_cpu_enable_fast_math=false")
    export_xla_flags("--xla_backend_optimization_level=1 --xla_cpu_enable_fast_math=false")  # held already: kept
    assert os.environ["XLA_FLAGS"] == (
        "--xla_backend_optimization_level=1 --xla_cpu_enable_fast_math=false --xla_backend_optimization_level=3"
    )
    monkeypatch.delenv("XLA_FLAGS")
    export_xla_flags("")
    assert "XLA_FLAGS" not in os.environ


def test_jobs_find_the_checkout_s_code_once(monkeypatch):
    from pipeline.execution.job_env import export_code_path

    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    export_code_path("/repo")
    export_code_path("/repo")  # an environment that holds the path already (a job's own) keeps it once
    assert os.environ["PYTHONPATH"] == os.pathsep.join(["/repo", "/elsewhere"])


def test_presets_and_schema_are_the_config_packages_data():
    """The package reads its own presets and schema; it computes no path into the workflow that uses it."""
    package = Path(pipeline.config.__file__).parent
    assert {PRESET_DIR.parent, SCHEMA_PATH.parent} == {package}
    assert {"paper.yaml", "tiny.yaml"} <= {path.name for path in PRESET_DIR.glob("*.yaml")}
    sources = {path.name: path.read_text() for path in package.glob("*.py")}
    assert [name for name, text in sources.items() if re.search(r"[\"']workflow[\"'/]", text)] == []
