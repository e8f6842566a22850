"""Dataset loader of the shipped tiny tasks (``custom_dataset: !function ...``): resolves a task's files against
this folder, where lm-eval's ``load_dataset`` would use the working directory."""

from pathlib import Path

import datasets

TASKS_DIR = Path(__file__).resolve().parent


def load_splits(task_data: str, **metadata) -> datasets.DatasetDict:
    """The splits ``train`` and ``test`` of a task from ``<task_data>.<split>.jsonl`` in this folder (``metadata``:
    the task's lm-eval metadata, unused)."""
    files = {split: str(TASKS_DIR / f"{task_data}.{split}.jsonl") for split in ("train", "test")}
    return datasets.load_dataset("json", data_files=files)


def split_last_word(docs: datasets.Dataset) -> datasets.Dataset:
    """``context`` = the text without its last word, ``target`` = " " + that word (lambada_openai's split)."""

    def split(doc: dict) -> dict:
        context, word = doc["text"].rsplit(" ", 1)
        return {"context": context, "target": f" {word}"}

    return docs.map(split)
