"""`python -m pipeline param-counts`: Table 6 and the baselines as the tidy CSV the report reads."""

import pandas as pd

from pipeline.cli import main
from pipeline.models import baseline_param_counts, table6_param_counts


def test_param_counts_csv(tmp_path):
    out = tmp_path / "param_counts.csv"
    assert main(["param-counts", "--out", str(out)]) == 0
    table = pd.read_csv(out)
    assert list(table.columns) == ["model", "time_embed_dim", "parameters"]
    diffeq = table[table["time_embed_dim"].notna()]
    assert dict(zip(diffeq["time_embed_dim"].astype(int), diffeq["parameters"], strict=True)) == table6_param_counts()
    baselines = table[table["time_embed_dim"].isna()]
    assert dict(zip(baselines["model"], baselines["parameters"], strict=True)) == baseline_param_counts()
