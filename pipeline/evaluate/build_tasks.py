"""Builder of the tiny preset's two lm-eval tasks (``pipeline/evaluate/tasks/``), byte-identical on every run, from
the validation splits of the shipped tiny corpora (no model trains on them), with a fixed seed:

- ``tiny_choice`` (multiple choice, acc/acc_norm like ARC): a half sentence, its true ending among ``CHOICES``
  endings of similar-length sentences of the same corpus;
- ``tiny_lambada`` (like ``lambada_openai``): a ``PASSAGE_WORDS``-word passage, the target its last word.
"""

import json
import random
import re
from pathlib import Path

from pipeline.artifacts import atomic_write_text
from pipeline.data.build_corpora import SOURCES
from pipeline.data.corpora import tiny_corpus_file
from pipeline.data.files import iter_texts

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
SEED = 1234
CHOICES = 4
SPLIT_SIZES = {"train": 40, "test": 200}
"""Items per split of each task: ``test`` is evaluated, ``train`` is the pool of few-shot examples."""
SENTENCE_WORDS = (8, 30)
PASSAGE_WORDS = (12, 36)

ATTRIBUTION = re.compile(r"\s--\s.*$", re.DOTALL)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
PLAIN_TEXT = re.compile(r"^[A-Za-z0-9 ,;:'\"()?!.-]+$")
LAST_WORD = re.compile(r"^(.*\S)\s+([A-Za-z]{3,})[.!?\"']*$", re.DOTALL)


def paragraphs(corpus: str) -> list[str]:
    """Paragraphs of a corpus's validation split, whitespace collapsed, fortune attributions (``-- Author``) cut."""
    collapsed = (
        " ".join(paragraph.split())
        for text in iter_texts([tiny_corpus_file(corpus, "validation")])
        for paragraph in re.split(r"\n\s*\n", ATTRIBUTION.sub("", text))
    )
    return [paragraph for paragraph in collapsed if paragraph and PLAIN_TEXT.match(paragraph)]


def sentences(corpus: str) -> list[str]:
    """Sentences of ``SENTENCE_WORDS`` words, in corpus order, without duplicates."""
    lo, hi = SENTENCE_WORDS
    found = [s for p in paragraphs(corpus) for s in SENTENCE_END.split(p) if lo <= len(s.split()) <= hi]
    return list(dict.fromkeys(found))


def choice_items(corpus: str, count: int, rng: random.Random) -> list[dict]:
    """``count`` sentence-completion items: {context, choices, label, source}; distractors are the endings of the
    other sentences closest in word count to the true one (ties broken at random)."""
    cut = [(words[: len(words) // 2], words[len(words) // 2 :]) for words in (s.split() for s in sentences(corpus))]
    chosen = rng.sample(range(len(cut)), count)
    items = []
    for index in chosen:
        head, tail = cut[index]
        others = [j for j in range(len(cut)) if j != index and cut[j][1] != tail]
        rng.shuffle(others)
        others.sort(key=lambda j: abs(len(cut[j][1]) - len(tail)))
        endings = [" ".join(cut[j][1]) for j in others[: CHOICES - 1]]
        label = rng.randrange(CHOICES)
        endings.insert(label, " ".join(tail))
        items.append({"context": " ".join(head), "choices": endings, "label": label, "source": corpus})
    return items


def last_passage(paragraph: str) -> str | None:
    """The paragraph's last run of whole sentences with ``PASSAGE_WORDS`` words that ends in a word, if any."""
    lo, hi = PASSAGE_WORDS
    parts = SENTENCE_END.split(paragraph)
    for end in reversed(range(len(parts))):
        start = end
        while start > 0 and len(" ".join(parts[start - 1 : end + 1]).split()) <= hi:
            start -= 1
        passage = " ".join(parts[start : end + 1])
        if lo <= len(passage.split()) <= hi and LAST_WORD.match(passage):
            return passage
    return None


def lambada_items(corpus: str, count: int, rng: random.Random) -> list[dict]:
    """``count`` passages {text, source}, at most one per paragraph, the final punctuation of the last word
    dropped (as in LAMBADA, whose ``text`` ends in the bare target word)."""
    passages = list(dict.fromkeys(passage for passage in map(last_passage, paragraphs(corpus)) if passage))
    if len(passages) < count:
        raise ValueError(
            f"{tiny_corpus_file(corpus, 'validation')}: {len(passages)} LAMBADA-style passages, "
            f"expected at least {count}."
        )
    return [
        {"text": " ".join(LAST_WORD.match(text).groups()), "source": corpus} for text in rng.sample(passages, count)
    ]


def build_task_data(out_dir: Path = TASKS_DIR) -> dict[str, dict[str, int]]:
    """Write ``<task>.<split>.jsonl`` for both tasks into ``out_dir`` (half of each task's items from each
    corpus, shuffled, then cut into ``SPLIT_SIZES``); returns items per task and split."""
    rng = random.Random(SEED)
    half = sum(SPLIT_SIZES.values()) // len(SOURCES)
    tasks = {}
    for task, make in (("tiny_choice", choice_items), ("tiny_lambada", lambada_items)):
        items = [item for corpus in sorted(SOURCES) for item in make(corpus, half, rng)]
        rng.shuffle(items)
        tasks[task] = {"train": items[: SPLIT_SIZES["train"]], "test": items[SPLIT_SIZES["train"] :]}
    for task, splits in tasks.items():
        for split, items in splits.items():
            lines = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items)
            atomic_write_text(Path(out_dir) / f"{task}.{split}.jsonl", lines)
    return {task: {split: len(items) for split, items in splits.items()} for task, splits in tasks.items()}
