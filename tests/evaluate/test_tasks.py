"""The shipped tiny lm-eval tasks: rebuilt byte-identically by their builder, loadable offline by lm-eval."""

from pipeline.evaluate.build_tasks import CHOICES, SPLIT_SIZES, build_task_data
from pipeline.evaluate.lm_eval_tasks import resolve_tasks

TASKS = ("tiny_choice", "tiny_lambada")


def test_builder_reproduces_the_shipped_task_data(tmp_path, task_dir):
    counts = build_task_data(tmp_path)
    assert counts == {task: SPLIT_SIZES for task in TASKS}
    for task in TASKS:
        for split in SPLIT_SIZES:
            name = f"{task}.{split}.jsonl"
            assert (tmp_path / name).read_bytes() == (task_dir / name).read_bytes(), name


def test_lm_eval_loads_the_tiny_tasks_offline_from_the_task_folder(task_dir):
    manager = resolve_tasks(list(TASKS), task_dir)
    assert sorted(manager.all_tasks) == sorted(TASKS)
    tasks = manager.load(list(TASKS))["tasks"]
    choice, lambada = tasks["tiny_choice"], tasks["tiny_lambada"]
    assert choice.OUTPUT_TYPE == "multiple_choice" and lambada.OUTPUT_TYPE == "loglikelihood"
    for task in (choice, lambada):
        assert len(task.test_docs()) == SPLIT_SIZES["test"] and len(task.training_docs()) == SPLIT_SIZES["train"]
    doc = choice.test_docs()[0]
    assert len(choice.doc_to_choice(doc)) == CHOICES and 0 <= choice.doc_to_target(doc) < CHOICES
    assert choice.doc_to_text(doc) == doc["context"]
    doc = lambada.test_docs()[0]
    context, target = lambada.doc_to_text(doc), lambada.doc_to_target(doc)
    assert context + target == doc["text"] and target.startswith(" ") and " " not in target[1:]
    assert target[1:].isalpha()
    sources = {doc["source"] for task in (choice, lambada) for doc in task.test_docs()}
    assert sources == {"pydocs", "fortunes"}
