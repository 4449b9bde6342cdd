"""Scoring multiple-choice items by likelihood: the built-in evaluator (trainer.likelihood) against
lm-evaluation-harness's loop through the project's adapter (trainer.harness), same model, same
items, on the CPU.

Items: the built-in tasks of experiment.tasks (continuation, last-word cloze, minimal pairs; the
topic task zero-shot and with 3 examples) built from BBC News articles of the ``bbc-news`` data
in the demo's text package (:func:`demo.real_text.read_bbc`), :data:`ITEMS` per task. Model: the
demo experiment's shape (4 layers, 4 heads, width 96, window 256; about 0.83M parameters), its
weights seeded (scoring time does not depend on training), with a 4,096-token BPE trained on the
same articles. Both sides score every choice of every item after its context and alone (for
the built-in ``acc_pmi`` and lm-eval's ``acc_mutual_info``, which the task YAMLs ask for), and
compute accuracy and accuracy normalized by length; :data:`REPEATS` times each,
alternating which goes first; medians count. lm-eval's side is timed from ``simple_evaluate`` to
its return (its task building, request construction and metrics included: what a user of lm-eval
waits for), the built-in side from reading the items files to the metrics.

The last line printed is one JSON object: ``speed_ratio`` is lm-eval's wall time over the
built-in one's (above 1: the built-in evaluator is faster); ``max_loglik_difference`` the largest
difference of a choice's log-likelihood between the two, and ``acc_agreement`` the share of tasks
whose accuracy and PMI accuracy are the same on both.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import polars as pl
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ITEMS = 200
REPEATS = 3
THREADS = 2
MODEL = {"block_size": 256, "n_layer": 4, "n_head": 4, "n_embd": 96}


def _inputs(folder: Path) -> tuple[Path, list[Path], list[Path]]:
    """A checkpoint folder, the items files and their lm-eval YAMLs."""
    from demo.real_text import read_bbc
    from experiment.tasks import write_built_tasks
    from pipeline.formats.choices import write_lm_eval_task
    from pipeline.formats.task import topic_task_frame
    from pipeline.formats.tokens import load_tokenizer
    from pipeline.tokenizer import train_tokenizer
    from trainer.checkpoints import CHECKPOINT_FORMAT, save_checkpoint
    from trainer.model import GPT, GPTConfig

    articles, _ = read_bbc()
    texts = pl.DataFrame(
        {
            "id": [f"bbc/{i}" for i in range(len(articles))],
            "text": [a.text for a in articles],
            "set": "news",
            "lang": "en",
            "clean": True,
        }
    )
    heldout, rest = texts.head(300), texts.slice(300)
    tokenizer_path = train_tokenizer(rest["text"].to_list()[:1500], folder / "tokenizer.json", vocab_size=4096)
    tokenizer = load_tokenizer(tokenizer_path)
    task = topic_task_frame(articles[300:], 200, ITEMS, seed=0)
    items = write_built_tasks(folder / "items", heldout, task, ITEMS, [0, 3], seed=0)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tokenizer.get_vocab_size(with_added_tokens=True), **MODEL))
    out = folder / "model"
    state = {"format": CHECKPOINT_FORMAT, "step": 0, "model_config": asdict(model.config), "model": model.state_dict()}
    save_checkpoint(out, state, keep_last=1)
    tokenizer.save(str(out / "tokenizer.json"))
    yamls = [write_lm_eval_task(path, folder / "yaml" / f"{path.stem}.yaml") for path in items]
    return out, items, yamls


def _built_in(checkpoint: Path, items: list[Path]) -> tuple[float, dict, list[float]]:
    from trainer.generate import load_model
    from trainer.likelihood import read_choice_files, score_choices

    model, tokenizer, _ = load_model(checkpoint)
    started = time.perf_counter()
    loaded = read_choice_files(items)
    results, _ = score_choices(model, tokenizer, loaded)
    seconds = time.perf_counter() - started
    from trainer.likelihood import choice_loglikelihoods

    logliks = choice_loglikelihoods(model, tokenizer, pl.concat([frame for _, frame in loaded]))["loglik"].to_list()
    return seconds, results, logliks


def _lm_eval(checkpoint: Path, yamls: list[Path]) -> tuple[float, dict, dict]:
    import lm_eval
    from lm_eval.tasks import TaskManager

    from trainer.harness import CurateLM, task_name  # sets the offline settings, for lm-eval's libraries too

    model = CurateLM(str(checkpoint))
    manager = TaskManager(include_path=[str(yamls[0].parent)], include_defaults=False)
    started = time.perf_counter()
    found = lm_eval.simple_evaluate(
        model=model, tasks=[task_name(y) for y in yamls], task_manager=manager, log_samples=True, bootstrap_iters=0
    )
    return time.perf_counter() - started, found["results"], found["samples"]


def main() -> None:
    torch.set_num_threads(THREADS)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint, items, yamls = _inputs(Path(tmp))
        ours, theirs = [], []
        for repeat in range(REPEATS):
            order = ("ours", "theirs") if repeat % 2 == 0 else ("theirs", "ours")
            for side in order:
                if side == "ours":
                    seconds, results, logliks = _built_in(checkpoint, items)
                    ours.append(seconds)
                else:
                    seconds, their_results, samples = _lm_eval(checkpoint, yamls)
                    theirs.append(seconds)
                print(f"repeat {repeat} {side}: {seconds:.2f} s", flush=True)
        tasks = {path: pl.read_ndjson(path)["task"][0] for path in items}
    theirs_logliks = []
    names = {}
    for path in items:
        task = tasks[path]
        name = "curate_" + path.stem.replace("-", "_")
        names[task] = name
        for sample in sorted(samples[name], key=lambda s: s["doc_id"]):
            choices = len(sample["doc"]["choices"])  # then the same choices alone
            theirs_logliks += [resp[0][0] for resp in sample["resps"][:choices]]
    difference = max(abs(a - b) for a, b in zip(logliks, theirs_logliks, strict=True))
    agree = [
        results["tasks"][task]["acc"] == their_results[name]["acc,none"]
        and results["tasks"][task]["acc_pmi"] == their_results[name]["acc_mutual_info,none"]
        for task, name in names.items()
    ]
    choices = len(logliks)
    built, harness = statistics.median(ours), statistics.median(theirs)
    print(f"{'task':<24}{'items':>7}{'acc (ours)':>12}{'acc (lm-eval)':>15}")
    for task, name in names.items():
        m = results["tasks"][task]
        print(f"{task:<24}{m['items']:>7}{m['acc']:>12.4f}{their_results[name]['acc,none']:>15.4f}")
    print(
        f"{choices:,} choices: built-in {built:.2f} s ({choices / built:,.0f} choices/s), "
        f"lm-eval through the adapter {harness:.2f} s ({choices / harness:,.0f} choices/s)"
    )
    print(
        json.dumps(
            {
                "speed_ratio": harness / built,
                "built_in_s": built,
                "lm_eval_s": harness,
                "choices": choices,
                "items": sum(results["tasks"][t]["items"] for t in results["tasks"]),
                "tasks": len(names),
                "max_loglik_difference": difference,
                "acc_agreement": sum(agree) / len(agree),
                "threads": THREADS,
                "repeats": REPEATS,
            }
        )
    )


if __name__ == "__main__":
    main()
