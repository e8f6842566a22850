"""How many loglikelihood requests lm-eval sends one model: what the cost preview charges a downstream job."""

from __future__ import annotations

from typing import Any

LM_EVAL_TASKS = {
    "arc_challenge": (1172, 4),
    "arc_easy": (2376, 4),
    "hellaswag": (10042, 4),
    "lambada_openai": (5153, 1),
    "lambada_standard": (5153, 1),
    "logiqa": (651, 4),
    "mmlu": (14042, 4),
    "piqa": (1838, 2),
    "sciq": (1000, 4),
    "winogrande": (1267, 2),
    "wsc273": (273, 2),
}
"""(documents of the evaluation split, loglikelihood requests per document) of the paper's lm-eval tasks: the
published sizes of the splits lm-eval 0.4.13 evaluates, written here because the hub is unreachable offline (not
counted by this code; a cost estimate only)."""
MAX_REQUESTS_PER_DOCUMENT = max(requests for _, requests in LM_EVAL_TASKS.values())
"""Requests per document assumed for a task not in ``LM_EVAL_TASKS`` (local tasks; they need a ``limit``)."""


def lm_eval_requests(downstream: dict[str, Any]) -> int:
    """Loglikelihood requests per model: Σ over tasks and shot counts of documents × requests per document."""
    limit = downstream["limit"]
    requests = 0
    for task in downstream["tasks"]:
        if task in LM_EVAL_TASKS:
            documents, per_document = LM_EVAL_TASKS[task]
        elif limit is None:
            raise ValueError(
                f"key 'downstream.tasks' names {task!r}, whose size the cost preview does not know; "
                f"set 'downstream.limit' or use one of {sorted(LM_EVAL_TASKS)}."
            )
        else:
            documents, per_document = limit, MAX_REQUESTS_PER_DOCUMENT
        requests += min(documents, limit or documents) * per_document * len(downstream["shots"])
    return requests
