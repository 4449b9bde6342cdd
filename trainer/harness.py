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

Nothing is sent over the network: this module sets the offline settings of lm-eval's libraries
(:data:`OFFLINE`) before it imports lm-eval, and a task YAML whose dataset is not local (a hub
dataset, a URL) is refused with one line before anything runs (:func:`read_task_yaml`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# datasets, huggingface_hub and transformers read these once, when first imported (datasets
# otherwise counts each load with a request to S3): set here, before lm-eval imports them.
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_UPDATE_DOWNLOAD_COUNTS": "0",
    "HF_HUB_DISABLE_TELEMETRY": "1",
}


def stay_offline() -> None:
    """Set :data:`OFFLINE`; where datasets or huggingface_hub was imported already (it has read
    the variables), set its flags too."""
    os.environ.update(OFFLINE)
    config = sys.modules.get("datasets.config")
    if config is not None:
        config.HF_HUB_OFFLINE = config.HF_DATASETS_OFFLINE = True
        config.HF_UPDATE_DOWNLOAD_COUNTS = False
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = constants.HF_HUB_DISABLE_TELEMETRY = True


stay_offline()

import torch  # noqa: E402
from lm_eval.api.model import LM  # noqa: E402
from lm_eval.api.registry import register_model  # noqa: E402

from pipeline.formats.tokens import shard_encoder, special_ids  # noqa: E402
from trainer.generate import load_model  # noqa: E402
from trainer.likelihood import pair_loglikelihoods  # noqa: E402
from trainer.scoring import document_losses  # noqa: E402

OFFLINE_FIX = "curate eval is offline: point the YAML at local files"


class TaskYamlError(ValueError):
    """A task YAML that cannot run here (not YAML, no task, data not local); one line."""


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
    ...; ``samples`` per task with ``log_samples``). Each YAML is checked first
    (:func:`read_task_yaml`). lm-eval's own task library is indexed only with ``include_defaults``
    (8 s; its tasks read the Hugging Face hub, which stays offline)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    stay_offline()
    names = [task_name(path) for path in yaml_paths]
    folders = sorted({str(Path(path).resolve().parent) for path in yaml_paths})
    manager = TaskManager(include_path=folders, include_defaults=include_defaults)
    model = CurateLM(str(checkpoint), device=device, batch_size=batch)
    try:
        return lm_eval.simple_evaluate(
            model=model, tasks=names, task_manager=manager, log_samples=log_samples, bootstrap_iters=1000
        )
    except ConnectionError as error:  # data the checks above could not see (a group's task, a script)
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise TaskYamlError(f"tasks {', '.join(names)} need data from the network ({first}); {OFFLINE_FIX}") from None


def read_task_yaml(yaml_path: Path) -> dict:
    """The config of an lm-eval task YAML (its ``include`` merged, ``!function`` tags unread), as
    lm-eval reads it, checked: a mapping that names its task, whose dataset is a local one (a
    packaged builder such as ``json`` on local files, or a local folder). Raises
    :class:`TaskYamlError` with one line."""
    import yaml
    from lm_eval.tasks._yaml_loader import load_yaml

    path = Path(yaml_path)
    usage = "an lm-eval task YAML is a mapping (task:, dataset_path:, doc_to_text:, ...)"
    try:
        config = load_yaml(path, resolve_func=False)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(error, "problem", None) or getattr(error, "reason", None) or type(error).__name__
        raise TaskYamlError(f"{path}: not YAML ({where}{problem}); {usage}") from None
    except UnicodeDecodeError:
        raise TaskYamlError(f"{path}: not YAML (not UTF-8 text); {usage}") from None
    except (ValueError, OSError) as error:  # not a mapping, an include missing or in a cycle
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise TaskYamlError(f"{path}: not an lm-eval task YAML ({first}); {usage}") from None
    name = config.get("task") if isinstance(config.get("task"), str) else config.get("group")
    if not isinstance(name, str) or not name:
        raise TaskYamlError(f"{path}: no 'task:' name; {usage}")
    _check_local_data(config, name, path)
    return config


def _check_local_data(config: dict, name: str, path: Path) -> None:
    """Refuse a task whose dataset lm-eval would fetch: a hub name, or data files given as URLs."""
    from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES

    dataset = config.get("dataset_path")
    if dataset is None:  # a group, or a task of Python code: its own tasks are checked where they run
        return
    files = (config.get("dataset_kwargs") or {}).get("data_files") or []
    files = files.values() if isinstance(files, dict) else [files]
    named = [str(f) for entry in files for f in (entry if isinstance(entry, list) else [entry])]
    remote = [f for f in named if "://" in f and not f.startswith("file://")]
    if remote:
        raise TaskYamlError(f"{path}: task {name} reads {remote[0]} over the network; {OFFLINE_FIX}")
    if str(dataset) not in _PACKAGED_DATASETS_MODULES and not Path(str(dataset)).expanduser().exists():
        raise TaskYamlError(f"{path}: task {name} needs dataset {dataset} from the hub; {OFFLINE_FIX}")


def task_name(yaml_path: Path) -> str:
    """The task (or group) an lm-eval task YAML names, the YAML checked (:func:`read_task_yaml`)."""
    config = read_task_yaml(yaml_path)
    return config["task"] if isinstance(config.get("task"), str) else config["group"]
