"""Which runs each report output reads, from the resolved preset (used by ``workflow/rules/report.smk``)."""

from pipeline.config import RunSpec


def ablation_run_ids(runs: dict[str, RunSpec], prefix: str, *, with_gpt: bool = False) -> list[str]:
    """Runs of one ablation (ablation name starting with ``prefix``), preceded by the table runs of their base
    group and families (plus the base group's GPT when ``with_gpt``: the reference line of Figs. 14-15)."""
    variants = [run_id for run_id, spec in runs.items() if (spec.ablation or "").startswith(prefix)]
    groups = {runs[run_id].group for run_id in variants}
    families = {runs[run_id].model.family for run_id in variants} | ({"gpt"} if with_gpt else set())
    base = [
        run_id
        for run_id, spec in runs.items()
        if spec.role == "table" and spec.group in groups and spec.model.family in families
    ]
    return base + variants if variants else []
