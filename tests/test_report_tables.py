import json

import pytest

from pipeline.report.tables import RUN_COLUMNS, load_summaries, write_perplexity_tables


def summary(run_id, dataset, size, family, ppl, role="table"):
    return {"run_id": run_id, "preset": "tiny", "dataset": dataset, "size": size, "family": family, "role": role,
            "ablation": None if role != "ablation" else "beta2_0.999", "parameters": 1_500_000, "steps": 40,
            "tokens_seen": 40960, "final_train_loss": 5.0, "val_loss": 5.2, "val_ppl": ppl,
            "mean_tokens_per_s": 1e4}


def test_tables_hold_every_table_run_and_only_ablations_in_the_run_list(tmp_path):
    rows = [summary("wt103-small-gpt", "wt103", "small", "gpt", 120.5),
            summary("wt103-small-diffeq", "wt103", "small", "diffeq", 110.25),
            summary("owt-large-gpt", "owt", "large", "gpt", 99.0),
            summary("owt-large-beta2_0.999-gpt", "owt", "large", "gpt", 98.0, role="ablation")]
    paths = []
    for row in rows:
        path = tmp_path / f"{row['run_id']}.json"
        path.write_text(json.dumps(row))
        paths.append(path)
    out = {"markdown": tmp_path / "t.md", "csv": tmp_path / "t.csv", "runs_csv": tmp_path / "runs.csv"}
    write_perplexity_tables(paths, **out)
    markdown = out["markdown"].read_text()
    assert "## Table 1: WikiText-103" in markdown and "## Table 2: OpenWebText" in markdown
    assert "110.25 (1.50M)" in markdown and "120.50 (1.50M)" in markdown and "99.00 (1.50M)" in markdown
    assert "98.00" not in markdown
    assert out["csv"].read_text().count("\n") == 4
    assert out["runs_csv"].read_text().count("\n") == 5


def test_a_summary_missing_a_key_names_the_file(tmp_path):
    row = summary("wt103-small-gpt", "wt103", "small", "gpt", 1.0)
    del row["val_ppl"]
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(row))
    with pytest.raises(ValueError, match=r"summary.json: key 'val_ppl' is missing"):
        load_summaries([path])
    assert "val_ppl" in RUN_COLUMNS
