"""trainer.likelihood: choices scored as continuations, as the model's own loss says, in any
batch, with long contexts cut from the left; the metrics; and `curate eval` on a checkpoint."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict

import fsspec
import polars as pl
import pytest
import torch
from typer.testing import CliRunner

from flows.cli import app
from pipeline.formats.choices import write_choice_items
from pipeline.formats.tokens import load_tokenizer, special_ids
from pipeline.tokenizer import train_tokenizer
from tests.helpers import run_curate
from trainer.checkpoints import CHECKPOINT_FORMAT, save_checkpoint
from trainer.likelihood import (
    ChoiceScoringError,
    choice_loglikelihoods,
    choice_metrics,
    encode_pair,
)
from trainer.model import GPT, GPTConfig

WORDS = "the council met on monday to discuss the new budget and the plan for schools roads and parks".split()


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    texts = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))] * 5
    path = train_tokenizer(texts, tmp_path_factory.mktemp("tok") / "tokenizer.json", vocab_size=320)
    return load_tokenizer(path)


@pytest.fixture(scope="module")
def model(tokenizer):
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=tokenizer.get_vocab_size(), block_size=24, n_layer=1, n_head=2, n_embd=16)
    return GPT(config).eval()


def _items(rows) -> pl.DataFrame:
    return pl.DataFrame(
        [{"group": None, "lang": None, **row} for row in rows],
        schema={
            "id": pl.String,
            "task": pl.String,
            "context": pl.String,
            "choices": pl.List(pl.String),
            "gold": pl.Int64,
            "group": pl.String,
            "lang": pl.String,
        },
    )


ITEMS = [
    {
        "id": "a",
        "task": "t1",
        "context": "the council met on",
        "choices": [" monday", " budget", " roads and parks"],
        "gold": 0,
    },
    {"id": "b", "task": "t1", "context": "the new ", "choices": ["budget", "plan"], "gold": 1},
    {"id": "c", "task": "t2", "context": "", "choices": ["schools", "the council"], "gold": 0},
]


def _sequence_loglik(model, ids: list[int]) -> float:
    """Summed log-likelihood of ids[1:] given what precedes each, from the model's own loss."""
    idx = torch.tensor([ids[:-1]])
    _, loss = model(idx, torch.tensor([ids[1:]]))
    return -loss.item() * (len(ids) - 1)


def test_a_choice_scores_its_continuation_as_the_model_s_loss_says(model, tokenizer):
    eod = special_ids(tokenizer)["eod"]
    items = _items(ITEMS)
    scores = choice_loglikelihoods(model, tokenizer, items, batch=3)
    assert scores.height == 7 and not scores["truncated"].any()
    for row, choice, loglik, tokens in scores.select("row", "choice", "loglik", "tokens").iter_rows():
        context, text = ITEMS[row]["context"], ITEMS[row]["choices"][choice]
        context_ids, continuation_ids = encode_pair(tokenizer, context, text)
        whole = _sequence_loglik(model, [eod, *context_ids, *continuation_ids])
        prefix = _sequence_loglik(model, [eod, *context_ids]) if context_ids else 0.0
        assert tokens == len(continuation_ids)
        assert loglik == pytest.approx(whole - prefix, abs=1e-4)
    # without its context: the choice after the end-of-document token alone
    for row, choice, unconditional in scores.select("row", "choice", "unconditional").iter_rows():
        alone_ids = tokenizer.encode(ITEMS[row]["choices"][choice], add_special_tokens=False).ids
        assert unconditional == pytest.approx(_sequence_loglik(model, [eod, *alone_ids]), abs=1e-4)
    # the same numbers in batches of one (padding never leaks into a row)
    alone = choice_loglikelihoods(model, tokenizer, items, batch=1)
    assert alone["loglik"].to_list() == pytest.approx(scores["loglik"].to_list(), abs=1e-5)


def test_the_context_s_trailing_space_moves_to_the_continuation(tokenizer):
    assert encode_pair(tokenizer, "the new ", "budget") == encode_pair(tokenizer, "the new", " budget")


def test_a_long_context_is_cut_from_the_left_and_counted(model, tokenizer):
    eod = special_ids(tokenizer)["eod"]
    long = " ".join(WORDS * 3)
    scores = choice_loglikelihoods(model, tokenizer, _items([{**ITEMS[0], "context": long}]))
    assert scores["truncated"].all()
    context_ids, continuation_ids = encode_pair(tokenizer, long, " monday")
    kept = [eod, *context_ids, *continuation_ids][-(model.config.block_size + 1) :]
    expected = _sequence_loglik(model, kept) - _sequence_loglik(model, kept[: -len(continuation_ids)])
    assert scores["loglik"][0] == pytest.approx(expected, abs=1e-4)
    metrics = choice_metrics(scores, _items([{**ITEMS[0], "context": long}]))
    assert metrics["tasks"]["t1"]["truncated"] == 1


def test_a_choice_longer_than_the_window_is_refused_by_name(model, tokenizer):
    with pytest.raises(
        ChoiceScoringError, match=r"item 'a': choice 0 is \d+ tokens, longer than the model's window of 24"
    ):
        choice_loglikelihoods(model, tokenizer, _items([{**ITEMS[0], "choices": [" ".join(WORDS * 3), "x"]}]))


def test_accuracies_centred_accuracy_and_the_gold_bits_per_byte():
    items = _items(
        [
            {"id": "a", "task": "t", "context": "", "choices": ["aa", "b"], "gold": 0},
            {"id": "b", "task": "t", "context": "", "choices": ["aa", "b"], "gold": 1},
        ]
    )
    # Item a: "aa" (gold) wins summed (-1 > -2) and per byte (-0.5 > -2). Item b: "aa" wins summed
    # (-2 > -3) and per byte (-1 > -3), so its gold "b" loses both ways: each accuracy is 1 of 2.
    scores = pl.DataFrame(
        {
            "row": [0, 0, 1, 1],
            "choice": [0, 1, 0, 1],
            "loglik": [-1.0, -2.0, -2.0, -3.0],
            "unconditional": [-1.0, -4.0, -1.0, -4.0],  # PMI: a 0 vs 2, b -1 vs 1; "b" wins both
            "tokens": [1, 1, 1, 1],
            "bytes": [2, 1, 2, 1],
            "truncated": [False] * 4,
        }
    )
    m = choice_metrics(scores, items)["tasks"]["t"]
    assert m["items"] == 2 and m["chance"] == 0.5
    assert m["acc"] == 0.5 and m["acc_norm"] == 0.5 and m["centred_acc"] == 0.0
    assert m["acc_pmi"] == 0.5
    bits = 1 / math.log(2)
    gold = [1.0 / 2 * bits, 3.0 * bits]  # a: 1 nat over 2 bytes; b: 3 nats over 1 byte
    assert m["gold_bpb"] == pytest.approx(sum(gold) / 2)
    wrong = [2.0 * bits, 2.0 / 2 * bits]
    assert m["margin_bpb"] == pytest.approx(((wrong[0] - gold[0]) + (wrong[1] - gold[1])) / 2)
    assert 0.0 <= m["acc_ci"][0] <= 0.5 <= m["acc_ci"][1] <= 1.0


def test_curate_eval_scores_a_checkpoint_and_names_a_bad_item(tmp_path, model, tokenizer):
    out = tmp_path / "train"
    state = {"format": CHECKPOINT_FORMAT, "step": 7, "model_config": asdict(model.config), "model": model.state_dict()}
    save_checkpoint(out, state, keep_last=1)
    tokenizer.save(str(out / "tokenizer.json"))
    items = write_choice_items(_items(ITEMS), tmp_path / "items.jsonl")
    result = CliRunner().invoke(app, ["eval", str(out), "--tasks", str(items), "--json", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    assert "likelihood-scored tasks" in result.output and "CORE" in result.output
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["step"] == 7 and set(saved["tasks"]) == {"t1", "t2"} and saved["files"][0]["items"] == 3
    direct = choice_metrics(choice_loglikelihoods(model, tokenizer, _items(ITEMS)), _items(ITEMS))
    assert saved["tasks"]["t1"]["gold_bpb"] == pytest.approx(direct["tasks"]["t1"]["gold_bpb"], abs=1e-6)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**ITEMS[0], "gold": 5}) + "\n")
    result = CliRunner().invoke(app, ["eval", str(out), "--tasks", str(items), "--tasks", str(bad)])
    assert result.exit_code == 2
    assert "item 'a' (line 1) has a gold index outside its choices" in result.output
    assert "Traceback" not in result.output


def test_curate_eval_writes_its_json_to_a_url(tmp_path, monkeypatch, model, tokenizer):
    # typer's Path made memory://<name>/r.json the local file ./memory:/<name>/r.json.
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "train"
    state = {"format": CHECKPOINT_FORMAT, "step": 7, "model_config": asdict(model.config), "model": model.state_dict()}
    save_checkpoint(out, state, keep_last=1)
    tokenizer.save(str(out / "tokenizer.json"))
    items = write_choice_items(_items(ITEMS), tmp_path / "items.jsonl")
    url = f"memory://{tmp_path.name}/results/r.json"
    result = CliRunner().invoke(app, ["eval", str(out), "--tasks", str(items), "--json", url])
    assert result.exit_code == 0, result.output
    assert f"results: {url}" in result.output
    with fsspec.open(url, "r") as handle:
        assert json.load(handle)["step"] == 7
    assert not (tmp_path / "memory:").exists()
    fsspec.filesystem("memory").rm(f"/{tmp_path.name}", recursive=True)


# ---- the lm-evaluation-harness adapter (trainer.harness) ---------------------------------------


def _checkpoint(tmp_path, model, tokenizer):
    out = tmp_path / "train"
    state = {"format": CHECKPOINT_FORMAT, "step": 3, "model_config": asdict(model.config), "model": model.state_dict()}
    save_checkpoint(out, state, keep_last=1)
    tokenizer.save(str(out / "tokenizer.json"))
    return out


def test_lm_eval_scores_an_items_file_as_the_built_in_evaluator_does(tmp_path, model, tokenizer):
    pytest.importorskip("lm_eval")
    from pipeline.formats.choices import write_lm_eval_task
    from trainer.harness import evaluate_yaml_tasks

    out = _checkpoint(tmp_path, model, tokenizer)
    items = write_choice_items(_items(ITEMS), tmp_path / "items.jsonl")
    yaml = write_lm_eval_task(items, tmp_path / "yaml" / "items.yaml")
    found = evaluate_yaml_tasks(out, [yaml], log_samples=True)
    samples = sorted(found["samples"]["curate_items"], key=lambda s: s["doc_id"])
    # per item lm-eval asks for each choice after the context, then (acc_mutual_info) alone
    width = [len(row["choices"]) for row in ITEMS]
    theirs = [resp[0][0] for s, k in zip(samples, width) for resp in s["resps"][:k]]
    alone = [resp[0][0] for s, k in zip(samples, width) for resp in s["resps"][k:]]
    scores = choice_loglikelihoods(model, tokenizer, _items(ITEMS))
    assert theirs == pytest.approx(scores["loglik"].to_list(), abs=1e-4)
    assert alone == pytest.approx(scores["unconditional"].to_list(), abs=1e-4)
    assert [tuple(a) for s, k in zip(samples, width) for a in s["arguments"][:k]] == [
        (row["context"], choice) for row in ITEMS for choice in row["choices"]
    ]
    direct = choice_metrics(choice_loglikelihoods(model, tokenizer, _items(ITEMS)), _items(ITEMS))
    accuracy = sum(m["acc"] * m["items"] for m in direct["tasks"].values()) / len(ITEMS)
    assert found["results"]["curate_items"]["acc,none"] == pytest.approx(accuracy)
    pmi = sum(m["acc_pmi"] * m["items"] for m in direct["tasks"].values()) / len(ITEMS)
    assert found["results"]["curate_items"]["acc_mutual_info,none"] == pytest.approx(pmi)


def test_lm_eval_rolling_and_generation_match_the_scorer_and_greedy_decoding(tmp_path, model, tokenizer):
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance

    from trainer.harness import CurateLM
    from trainer.scoring import document_losses

    lm = CurateLM(str(_checkpoint(tmp_path, model, tokenizer)))
    text = " ".join(WORDS * 3)  # longer than the window: scored in windows, each token once
    rolling = lm.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, (text,), 0)])
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    nats, tokens = document_losses(model, [ids], special_ids(tokenizer)["eod"])
    assert tokens[0] == len(ids) > model.config.block_size
    assert rolling == pytest.approx([-nats[0]], abs=1e-4)
    eod = special_ids(tokenizer)["eod"]
    idx = torch.tensor([[eod, *tokenizer.encode("the council").ids]])
    greedy = model.generate(idx, 12, temperature=0.0, eod_id=eod)[0, idx.size(1) :].tolist()
    whole = tokenizer.decode(greedy[: greedy.index(eod)] if eod in greedy else greedy, skip_special_tokens=False)
    stop = whole[len(whole) // 2 :][:3]  # a string the greedy text holds: generation stops before it
    made = lm.generate_until(
        [
            Instance("generate_until", {}, ("the council", {"until": [stop], "max_gen_toks": 12}), 0),
            Instance("generate_until", {}, ("the council", {"until": [], "max_gen_toks": 12}), 1),
        ]
    )
    assert made == [whole.split(stop, 1)[0], whole] and stop and stop not in made[0]


def test_curate_eval_runs_a_task_yaml_through_lm_eval(tmp_path, model, tokenizer):
    pytest.importorskip("lm_eval")
    from pipeline.formats.choices import write_lm_eval_task

    out = _checkpoint(tmp_path, model, tokenizer)
    items = write_choice_items(_items(ITEMS), tmp_path / "items.jsonl")
    yaml = write_lm_eval_task(items, tmp_path / "items.yaml", task="mine")
    result = CliRunner().invoke(
        app, ["eval", str(out), "--tasks", str(items), "--tasks", str(yaml), "--json", str(tmp_path / "r.json")]
    )
    assert result.exit_code == 0, result.output
    assert "lm-evaluation-harness tasks" in result.output and "mine" in result.output
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["lm_eval"]["results"]["mine"]["acc,none"] == pytest.approx(
        sum(saved["tasks"][t]["acc"] * saved["tasks"][t]["items"] for t in saved["tasks"]) / len(ITEMS)
    )
    result = CliRunner().invoke(app, ["eval", str(out), "--tasks", str(tmp_path / "none.yaml")])
    assert result.exit_code == 2 and "no such task YAML" in result.output and "Traceback" not in result.output


# A `curate` process whose every attempt to reach another host is written to a log and fails.
NETWORK_GUARD = """
import os, socket
def _refused(*args, **kwargs):
    with open(os.environ["NETWORK_LOG"], "a") as log:
        log.write(repr(args[:2]) + "\\n")
    raise OSError("no network in this test")
_connect = socket.socket.connect
def _connect_local(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        _refused(address)
    return _connect(self, address)
socket.getaddrinfo = _refused
socket.socket.connect = _connect_local
"""

HUB_TASK = (
    "task: boolq_hub\ndataset_path: super_glue\ndataset_name: boolq\noutput_type: multiple_choice\n"
    "test_split: validation\ndoc_to_text: passage\ndoc_to_choice: ['no', 'yes']\ndoc_to_target: label\n"
)


def test_curate_eval_sends_nothing_over_the_network(tmp_path, model, tokenizer):
    """The project's own task YAML runs without a request (datasets counted each load with one to
    S3), and a YAML naming a hub dataset stops in one line before lm-eval asks the hub."""
    pytest.importorskip("lm_eval")
    from pipeline.formats.choices import write_lm_eval_task

    out = _checkpoint(tmp_path, model, tokenizer)
    items = write_choice_items(_items(ITEMS), tmp_path / "items.jsonl")
    own = write_lm_eval_task(items, tmp_path / "own" / "items.yaml", task="mine")
    (tmp_path / "hub").mkdir()
    (tmp_path / "hub" / "boolq.yaml").write_text(HUB_TASK)
    log = tmp_path / "network.log"
    env = {"NETWORK_LOG": str(log), **{k: "" for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}}
    done = run_curate(["eval", str(out), "--tasks", str(own)], tmp_path, env=env, prelude=NETWORK_GUARD)
    assert done.returncode == 0 and "mine" in done.stdout, done.stderr
    assert not log.exists(), log.read_text()
    done = run_curate(
        ["eval", str(out), "--tasks", str(tmp_path / "hub" / "boolq.yaml")], tmp_path, env=env, prelude=NETWORK_GUARD
    )
    error = done.stdout + done.stderr
    assert done.returncode == 2 and len(error.strip().splitlines()) == 1, error
    assert "task boolq_hub needs dataset super_glue from the hub; curate eval is offline" in error
    assert not log.exists(), log.read_text()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("task: x\ndataset_path: [json\n  : : :\n", r"not YAML \(line 3: did not find expected"),
        ("just some words\n", "not an lm-eval task YAML"),
        ("\x00 binary", r"not YAML \(.*characters are not allowed"),
        ("dataset_path: json\n", "no 'task:' name"),
        (
            "task: far\ndataset_path: json\ndataset_kwargs:\n  data_files: https://example.com/a.jsonl\n",
            "task far reads https://example.com/a.jsonl over the network; curate eval is offline",
        ),
    ],
)
def test_a_task_yaml_that_cannot_run_offline_is_one_line(tmp_path, model, tokenizer, text, problem):
    pytest.importorskip("lm_eval")
    yaml = tmp_path / "task.yaml"
    yaml.write_text(text)
    result = CliRunner().invoke(app, ["eval", str(_checkpoint(tmp_path, model, tokenizer)), "--tasks", str(yaml)])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert re.search(problem, result.output) and str(yaml) in result.output


def test_the_constant_answer_lines_show_a_model_that_gives_one_answer():
    labels = [" business", " sport", " tech"]
    gold = [0, 0, 1, 2]  # business is the most common right answer: always answering it scores 0.5
    items = _items(
        [{"id": f"q{k}", "task": "topic", "context": "x", "choices": labels, "gold": g} for k, g in enumerate(gold)]
    )
    rows = []
    for row in range(len(gold)):  # the model likes " sport" best on every item
        for choice in range(3):
            rows.append(
                {
                    "row": row,
                    "choice": choice,
                    "loglik": -1.0 if choice == 1 else -9.0,
                    "unconditional": -1.0 if choice == 1 else (-9.5 if choice == gold[row] else -8.0),
                    "tokens": 1,
                    "bytes": 6,
                    "truncated": False,
                }
            )
    m = choice_metrics(pl.DataFrame(rows), items)["tasks"]["topic"]
    assert m["majority"] == pytest.approx(0.5) and m["top_answer_share"] == pytest.approx(1.0)
    assert m["acc_norm"] == pytest.approx(0.25)  # right only where sport is
    # taking each answer's own likelihood out leaves what the item adds: the gold one everywhere
    assert m["acc_pmi"] == pytest.approx(1.0)


@pytest.mark.parametrize("positions", ["rope", "learned"])
def test_choices_packed_after_their_shared_context_score_as_each_alone(tokenizer, positions):
    """An item's choices run in one row after one copy of the context (each at its own positions,
    seeing only the context and itself): the same log-likelihoods and greedy flags as each pair
    scored in a row of its own."""
    from trainer.likelihood import pair_loglikelihoods

    torch.manual_seed(1)
    config = GPTConfig(
        vocab_size=tokenizer.get_vocab_size(), block_size=24, n_layer=2, n_head=2, n_embd=16, positions=positions
    )
    model = GPT(config).eval()
    pairs = [("the council met on", c) for c in (" monday", " the new budget", " roads", " parks and schools")]
    pairs += [("", "the plan"), ("", "budget"), ("the new", " plan")]
    # more choices of one context than one packed row of twice the window holds: split over rows
    pairs += [("the", f" {' '.join(WORDS[k : k + 6])}") for k in range(12)]
    together = pair_loglikelihoods(model, tokenizer, pairs)
    alone = [pair_loglikelihoods(model, tokenizer, [pair]) for pair in pairs]
    assert together[0] == pytest.approx([a[0][0] for a in alone], abs=1e-5)
    assert together[1].tolist() == [bool(a[1][0]) for a in alone]
    assert together[2].tolist() == [int(a[2][0]) for a in alone]


def test_items_that_name_a_group_get_each_group_s_metrics(model, tokenizer):
    rows = [{**ITEMS[0], "id": f"g{k}", "group": ["x", "y"][k % 2]} for k in range(4)]
    rows.append({**ITEMS[1], "id": "none"})  # no group: in the task's numbers, in no group's
    items = _items(rows)
    found = choice_metrics(choice_loglikelihoods(model, tokenizer, items), items)["tasks"]["t1"]
    assert found["items"] == 5 and set(found["groups"]) == {"x", "y"}
    assert found["groups"]["x"]["items"] == found["groups"]["y"]["items"] == 2
    alone = choice_metrics(choice_loglikelihoods(model, tokenizer, items[[0, 2]]), items[[0, 2]])["tasks"]["t1"]
    assert found["groups"]["x"]["gold_bpb"] == pytest.approx(alone["gold_bpb"])


def test_an_experiment_s_task_result_is_read_back_only_for_the_same_items(tmp_path, model, tokenizer):
    from experiment.runs import score_tasks

    out = _checkpoint(tmp_path, model, tokenizer)
    items = write_choice_items(_items(ITEMS), tmp_path / "items.jsonl")
    result = tmp_path / "tasks" / "seed-0.json"
    first = score_tasks(out, [items], 8, result)
    assert result.with_suffix(".parquet").is_file()
    assert score_tasks(out, [items], 8, result) == first  # read back, not scored again
    write_choice_items(_items(ITEMS[:2]), items)  # the items changed: scored again
    again = score_tasks(out, [items], 8, result)
    assert again["files"][0]["items"] == 2 and set(again["tasks"]) == {"t1"}
