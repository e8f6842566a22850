"""Tables 1-6 from synthetic contract files: values, layout and the booktabs structure of the LaTeX view."""

import json

import pandas as pd
import pytest
from contract_files import table_files, write_downstream, write_param_counts, write_pretrain_run

from pipeline.cli import main
from pipeline.report.tables import (
    write_downstream_table,
    write_model_spec_table,
    write_param_count_table,
    write_perplexity_tables,
)
from pipeline.report.tidy_inputs import load_summaries


def test_perplexity_tables_hold_every_table_run_and_only_ablations_in_the_run_list(tmp_path):
    paths = [
        *(
            write_pretrain_run(tmp_path, f"wt103-small-{family}", ppl=ppl, parameters=parameters)
            for family, ppl, parameters in (
                ("gpt", 120.5, 1_500_000),
                ("diffeq", 110.25, 1_500_000),
                ("shared_ode", 130.0, 500_000),
                ("shared", 131.0, 500_000),
            )
        ),
        write_pretrain_run(tmp_path, "owt-large-gpt", ppl=99.0, parameters=1_500_000),
        write_pretrain_run(tmp_path, "owt-large-beta2_0.999-gpt", ppl=98.0, ablation="beta2_0.999"),
    ]
    write_perplexity_tables(paths, out=table_files(tmp_path / "t" / "perplexity"))
    assert main(["runs-csv", "--out", str(tmp_path / "t" / "runs.csv"), *map(str, paths)]) == 0
    markdown = (tmp_path / "t" / "perplexity.md").read_text()
    assert "## Table 1: WikiText-103" in markdown and "## Table 2: OpenWebText" in markdown
    assert "110.25 (1.50M)" in markdown and "120.50 (1.50M)" in markdown and "99.00 (1.50M)" in markdown
    assert "98.00" not in markdown
    table_1 = markdown.split("## Table 1")[1].split("## Table 2")[0].splitlines()[4:]
    rows = [line.split("|")[1].strip() for line in table_1 if line.startswith("|")]
    assert rows == ["GPT", "Shared parameter", "Shared ODE field", "DiffEqFormer"]
    assert "| Shared ODE field | 130.00 (0.50M) |" in markdown
    assert len(pd.read_csv(tmp_path / "t" / "perplexity.csv")) == 5
    assert len(pd.read_csv(tmp_path / "t" / "runs.csv")) == 6
    latex = (tmp_path / "t" / "perplexity.tex").read_text()
    assert latex.count(r"\toprule") == latex.count(r"\midrule") == latex.count(r"\bottomrule") == 2
    assert r"\caption{Table 1: WikiText-103}" in latex and "110.25 (1.50M)" in latex
    assert "<table" in (tmp_path / "t" / "perplexity.html").read_text()


def test_model_spec_table_reads_shapes_from_the_configs(tmp_path):
    paths = [
        write_pretrain_run(tmp_path, f"owt-{size}-{family}", ppl=100.0, parameters=parameters)
        for size, family, parameters in (
            ("small", "gpt", 210_000),
            ("large", "gpt", 790_000),
            ("llama1b", "llama", 460_000),
            ("large", "diffeq", 1_500_000),
        )
    ]
    write_model_spec_table(paths, out=table_files(tmp_path / "specs"))
    table = pd.read_csv(tmp_path / "specs.csv")
    assert set(zip(table["size"], table["family"], table["layers"], table["hidden_dim"], strict=True)) == {
        ("small", "gpt", 4, 48),
        ("large", "gpt", 8, 80),
        ("llama1b", "llama", 4, 64),
        ("large", "diffeq", 8, 80),
    }
    markdown = (tmp_path / "specs.md").read_text()
    assert "| GPT-small" in markdown and "Llama-1B" in markdown and "0.79M" in markdown and "176" in markdown
    assert "1.50M" not in markdown
    counts = table.set_index(["size", "family"])["levanter_1_1_parameters"]
    assert counts[("small", "gpt")] == 210_000
    assert counts[("llama1b", "llama")] == 460_000 + 4 * 2 * 64 * (64 // 4)


def test_downstream_table_reports_percent_accuracy_with_stderr_for_both_shots(tmp_path):
    accuracy = {("tiny_lambada", 0): 0.25, ("tiny_lambada", 5): 0.5}
    paths = [
        write_downstream(
            tmp_path, f"owt-large-{family}", family=family, accuracy={k: v + more for k, v in accuracy.items()}
        )
        for family, more in (("gpt", 0.0), ("diffeq", 0.1))
    ]
    write_downstream_table(paths, out=table_files(tmp_path / "downstream"))
    table = pd.read_csv(tmp_path / "downstream.csv")
    assert len(table) == 4 and set(table["shots"]) == {0, 5}
    row = table[(table["role"] == "diffeq") & (table["shots"] == 5)].iloc[0]
    assert row["acc"] == pytest.approx(60.0) and row["acc_stderr"] == pytest.approx(100 * (0.6 * 0.4 / 100) ** 0.5)
    markdown = (tmp_path / "downstream.md").read_text()
    assert "Table 4" in markdown and "25.00 (4.33)" in markdown and "5-shot DiffEqFormer" in markdown


def test_an_accuracy_given_in_percent_fails_naming_the_file(tmp_path):
    path = write_downstream(tmp_path, "run", family="gpt", accuracy={("t", 0): 0.5})
    frame = pd.read_csv(path)
    frame.loc[frame["metric"] == "acc", "value"] = 50.0
    frame.to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"downstream.csv: key 'value' holds an accuracy outside \[0, 1\]"):
        write_downstream_table([path], out=table_files(tmp_path / "downstream"))


def test_param_count_table_lists_baselines_and_every_d(tmp_path):
    write_param_count_table(write_param_counts(tmp_path), out=table_files(tmp_path / "params"))
    table = pd.read_csv(tmp_path / "params.csv")
    assert table["time_embed_dim"].isna().sum() == 1 and list(table["time_embed_dim"].dropna()) == [4, 8, 16]
    assert "1.40M" in (tmp_path / "params.md").read_text()


def test_a_summary_missing_a_key_names_the_file(tmp_path):
    path = write_pretrain_run(tmp_path, "wt103-small-gpt", ppl=1.0)
    summary = json.loads(path.read_text())
    del summary["val_ppl"]
    path.write_text(json.dumps(summary))
    with pytest.raises(ValueError, match=r"summary.json: key 'val_ppl' is missing"):
        load_summaries([path])


def test_a_pretraining_summary_from_before_the_key_rename_reports_its_updates_as_train_steps(tmp_path):
    """Pretraining summaries named their optimizer updates ``steps`` (fine-tunes: ``train_steps``); a run folder
    written then reports under the one key, without a rerun."""
    path = write_pretrain_run(tmp_path, "wt103-small-gpt", ppl=1.0)
    summary = json.loads(path.read_text())
    summary["steps"] = summary.pop("train_steps")
    path.write_text(json.dumps(summary))
    assert load_summaries([path])["train_steps"].tolist() == [40]
