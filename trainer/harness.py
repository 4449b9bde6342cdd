"""The project's GPT and tokenizer as an lm-evaluation-harness model (the optional ``lm-eval``
extra), so that any lm-eval task with local data files runs on a project checkpoint, and items
files of :mod:`pipeline.formats.choices` run through lm-eval as task YAMLs.

    from trainer.harness import CurateLM, evaluate_yaml_tasks
    evaluate_yaml_tasks("runs/demo/train/main", ["tasks/continuation-news.yaml"])

or, once this module is imported, ``lm_eval.simple_evaluate(model="curate",
model_args="checkpoint=runs/demo/train/main", ...)``.

The three request types score as the built-in evaluator (trainer.likelihood) and the document
scorer (trainer.scoring) do, so the two give the same log-likelihoods: ``loglikelihood`` is
:func:`trainer.likelihood.pair_loglikelihoods` (lm-eval's context/continuation split, the
end-of-document token first, long contexts cut from the left), ``loglikelihood_rolling`` the whole
text after the end-of-document token in windows of the model's context, each token predicted
once, and ``generate_until`` greedy decoding (``temperature`` > 0 samples, seeded) up to
``max_gen_toks`` tokens, cut at the first ``until`` string.

Nothing is downloaded: lm-eval and its datasets library are told to stay offline
(``HF_DATASETS_OFFLINE``, ``HF_HUB_OFFLINE``), so a task whose data is not a local file fails
with the library's error instead of fetching it.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from pipeline.formats.tokens import shard_encoder, special_ids
from trainer.generate import load_model
from trainer.likelihood import pair_loglikelihoods
from trainer.scoring import document_losses

OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


@register_model("curate")
class CurateLM(LM):
    """A project checkpoint (a training out_dir or one checkpoint file) as an lm-eval model."""

    def __init__(self, checkpoint: str, device: str = "cpu", batch_size: int | str = 32, **_ignored):
        super().__init__()
        self.model, self.tokenizer, self.info = load_model(Path(checkpoint), device)
        self.encoder = shard_encoder(self.tokenizer)
        self.eod = special_ids(self.tokenizer)["eod"]
        self.batch = 32 if str(batch_size).startswith("auto") else int(batch_size)
        self._device = torch.device(device)

    @property
    def device(self):
        return self._device

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        pairs = [tuple(request.args) for request in requests]
        loglik, greedy, _, _ = pair_loglikelihoods(self.model, self.tokenizer, pairs, self.batch)
        return [(float(value), bool(best)) for value, best in zip(loglik, greedy)]

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        ids = [self.encoder.encode(request.args[0], add_special_tokens=False).ids for request in requests]
        nats, _ = document_losses(self.model, ids, self.eod, self.batch)
        return [-float(value) for value in nats]

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        out = []
        for request in requests:
            context, options = request.args
            until = options.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            temperature = float(options.get("temperature", 0.0)) if options.get("do_sample", True) else 0.0
            ids = [self.eod, *self.encoder.encode(context, add_special_tokens=False).ids]
            idx = torch.tensor([ids[-self.model.config.block_size :]], dtype=torch.long, device=self._device)
            generator = torch.Generator(device=self._device).manual_seed(0)
            with torch.no_grad():
                made = self.model.generate(
                    idx, int(options.get("max_gen_toks", 64)), temperature, eod_id=self.eod, generator=generator
                )
            new = made[0, idx.size(1) :].tolist()
            text = self.tokenizer.decode(
                new[: new.index(self.eod)] if self.eod in new else new, skip_special_tokens=False
            )
            for stop in until:
                text = text.split(stop, 1)[0]
            out.append(text)
        return out


def evaluate_yaml_tasks(
    checkpoint: Path,
    yaml_paths: list[Path],
    device: str = "cpu",
    batch: int = 32,
    log_samples: bool = False,
    include_defaults: bool = False,
) -> dict:
    """Run lm-eval task YAMLs (local data files only) on a checkpoint through :class:`CurateLM`:
    lm-eval's result dict (``results`` per task: ``acc,none``, ``acc_norm,none``, their stderr,
    ...; ``samples`` per task with ``log_samples``). lm-eval's own task library is indexed only
    with ``include_defaults`` (8 s; its tasks read the Hugging Face hub, which stays offline)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    for key, value in OFFLINE.items():
        os.environ.setdefault(key, value)
    folders = sorted({str(Path(path).resolve().parent) for path in yaml_paths})
    manager = TaskManager(include_path=folders, include_defaults=include_defaults)
    names = [task_name(path) for path in yaml_paths]
    model = CurateLM(str(checkpoint), device=device, batch_size=batch)
    return lm_eval.simple_evaluate(
        model=model, tasks=names, task_manager=manager, log_samples=log_samples, bootstrap_iters=1000
    )


def task_name(yaml_path: Path) -> str:
    """The ``task:`` an lm-eval task YAML names (the first such line)."""
    for line in Path(yaml_path).read_text(encoding="utf-8").splitlines():
        if line.startswith("task:"):
            return line.split(":", 1)[1].strip().strip("'\"")
    raise ValueError(f"{yaml_path}: no 'task:' line; an lm-eval task YAML names its task")
