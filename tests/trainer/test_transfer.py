"""The transfer protocol on a synthetic topic task whose label is carried by one word: the dev split
is class-balanced and apart from the pool, draws differ and nest, the probe and the fine-tuning
choose their setting by dev loss, fine-tuning stops early when the dev loss stops falling, and the
bag-of-words reference reads what the models read and solves a task one word decides."""

from __future__ import annotations

import polars as pl
import pytest
import torch
import torch.nn.functional as F

from pipeline.formats.task import draw_seed, labelled_subsets, load_task, task_splits
from pipeline.formats.tokens import load_tokenizer
from pipeline.tokenizer import train_tokenizer
from trainer.model import GPT, GPTConfig
from trainer.transfer import (
    TransferSettings,
    _classify,
    _finetune_once,
    _logistic,
    _scores,
    bag_of_words,
    encode_texts,
    evaluate_transfer,
    linear_probe,
    read_prefixes,
)

TOPICS = {"sport": "football", "money": "market", "tech": "software"}
FILLER = "the a of in on for with and to from at by as it was is be this that one".split()


def _task(train: int = 60, test: int = 30, dev: int = 0) -> pl.DataFrame:
    rows = []
    for split, count in (("train", train), ("dev", dev), ("test", test)):
        for i in range(count):
            label = sorted(TOPICS)[i % len(TOPICS)]
            words = [FILLER[(i * 7 + k * 3) % len(FILLER)] for k in range(12)]
            words.insert(i % 5, TOPICS[label])
            rows.append({"id": f"{split}-{i:03d}", "text": " ".join(words), "label": label, "split": split})
    return pl.DataFrame(rows)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    train_tokenizer(_task(train=90)["text"].to_list() * 3, path, vocab_size=300)
    return load_tokenizer(path)


def test_dev_split_is_class_balanced_apart_and_fixed(tmp_path):
    task = _task()
    pool, dev, test = task_splits(task, 15, seed=3)
    assert (pool.height, dev.height, test.height) == (45, 15, 30)
    assert set(pool["id"]).isdisjoint(dev["id"]) and set(pool["id"]) | set(dev["id"]) == set(
        task.filter(pl.col("split") == "train")["id"]
    )
    assert sorted(dev.group_by("label").len()["len"].to_list()) == [5, 5, 5]
    assert task_splits(task, 15, seed=3)[1]["id"].to_list() == dev["id"].to_list()
    assert task_splits(task, 15, seed=4)[1]["id"].to_list() != dev["id"].to_list()
    # at most half of the train split; a task's own dev split is used as it is
    assert task_splits(task, 1000, seed=0)[1].height == 30
    own = _task(dev=9)
    own.write_parquet(tmp_path / "task.parquet")
    pool, dev, _ = task_splits(load_task(tmp_path / "task.parquet"), 15, seed=0)
    assert dev["id"].to_list() == [f"dev-{i:03d}" for i in range(9)] and pool.height == 60
    own.with_columns(split=pl.lit("holdout")).write_parquet(tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match="split values must be"):
        load_task(tmp_path / "bad.parquet")


def test_draws_differ_and_nest_within_a_draw():
    pool = task_splits(_task(), 15, seed=0)[0]
    draws = [labelled_subsets(pool, [6, 12, 0], draw_seed(seed=1, draw=d)) for d in range(3)]
    for subsets in draws:
        assert set(subsets[6]["id"]) < set(subsets[12]["id"]) and subsets[0].height == pool.height
        assert sorted(subsets[6].group_by("label").len()["len"].to_list()) == [2, 2, 2]
    assert len({tuple(sorted(s[6]["id"])) for s in draws}) == 3
    # another run seed draws other subsets; the same seed and draw the same ones
    assert labelled_subsets(pool, [6], draw_seed(1, 0))[6]["id"].to_list() == draws[0][6]["id"].to_list()
    assert labelled_subsets(pool, [6], draw_seed(2, 0))[6]["id"].to_list() != draws[0][6]["id"].to_list()


def test_probe_picks_the_penalty_best_on_the_dev_split():
    generator = torch.Generator().manual_seed(0)
    centers = torch.randn(3, 8, generator=generator) * 0.7
    y = torch.arange(90) % 3
    x = centers[y] + torch.randn(90, 8, generator=generator)
    settings = TransferSettings(probe_l2=(1e-4, 1e-2, 1.0, 30.0))
    result = linear_probe(x[:30], y[:30], x[30:60], y[30:60], x[60:], y[60:], 3, settings)
    mean, std = x[:30].mean(0), x[:30].std(0, unbiased=False)
    dev = {}
    for l2 in settings.probe_l2:
        weight, bias = _logistic(((x[:30] - mean) / std).double(), y[:30], 3, l2, settings.probe_iterations)
        logits = ((x[30:60] - mean) / std).double() @ weight + bias
        dev[l2] = (-float((logits.argmax(1) == y[30:60]).double().mean()), float(F.cross_entropy(logits, y[30:60])))
    assert result["l2"] == min(dev, key=dev.get)  # highest dev accuracy, then lowest dev loss
    assert result["dev_loss"] == pytest.approx(dev[result["l2"]][1], rel=1e-5)
    assert result["dev_accuracy"] == pytest.approx(-dev[result["l2"]][0])
    assert result["accuracy"] > 0.6
    # without a dev split the first penalty is taken
    assert linear_probe(x[:30], y[:30], None, None, x[60:], y[60:], 3, settings)["l2"] == 1e-4


def _model(tokenizer) -> GPT:
    torch.manual_seed(0)
    return GPT(
        GPTConfig(
            vocab_size=tokenizer.get_vocab_size(with_added_tokens=True), block_size=32, n_layer=1, n_head=2, n_embd=32
        )
    )


def _data(frame: pl.DataFrame, tokenizer):
    tokens, lengths = encode_texts(frame["text"].to_list(), tokenizer, 24)
    index = {label: i for i, label in enumerate(sorted(TOPICS))}
    return tokens, lengths, torch.tensor([index[label] for label in frame["label"]])


def test_finetuning_learns_keeps_its_best_state_and_stops_early(tokenizer):
    pool, dev, test = task_splits(_task(), 15, seed=0)
    model = _model(tokenizer)
    settings = TransferSettings(
        finetune_min_steps=80,
        finetune_max_steps=80,
        finetune_eval_every=5,
        finetune_patience=2,
        finetune_warmup_steps=5,
    )
    train = _data(pool, tokenizer)
    backbone, head, best, step = _finetune_once(model, train, _data(dev, tokenizer), 3, 3e-3, settings, seed=0)
    # the model it returns is the one the dev split was best at, and it learned the keyword (chance: 1/3)
    dev_x, test_x = _data(dev, tokenizer), _data(test, tokenizer)
    assert _scores(_classify(backbone, head, dev_x[0], dev_x[1], 64), dev_x[2]) == pytest.approx(best)
    assert _scores(_classify(backbone, head, test_x[0], test_x[1], 64), test_x[2])["accuracy"] > 0.7
    # a learning rate too high to learn stops at patience, long before the cap
    _, _, bad, bad_step = _finetune_once(model, train, dev_x, 3, 3.0, settings, seed=0)
    assert bad["accuracy"] < best["accuracy"] and bad_step < 80
    # the original model is untouched
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), _model(tokenizer).state_dict().values()))


def test_steps_follow_epochs_within_bounds():
    settings = TransferSettings(finetune_batch=16, finetune_epochs=20, finetune_min_steps=20, finetune_max_steps=120)
    assert settings.steps(10) == 20  # 20 epochs of one batch of 10
    assert settings.steps(50) == 63
    assert settings.steps(400) == 120
    assert TransferSettings(finetune_min_steps=30).steps(10) == 30


def test_curves_share_draws_across_models_and_bag_of_words_reads_the_same_text(tokenizer):
    task = _task()
    settings = TransferSettings(
        max_tokens=6,
        draws=2,
        dev_docs=15,
        finetune_sizes=(6,),
        finetune_lrs=(1e-3, 3e-3),
        finetune_min_steps=4,
        finetune_max_steps=4,
        finetune_eval_every=2,
    )
    result = evaluate_transfer(_model(tokenizer), tokenizer, task, [6, 0], seed=1, settings=settings)
    assert (result["pool_examples"], result["dev_examples"], result["test_examples"]) == (45, 15, 30)
    assert [d["draw"] for d in result["probe"]["6"]["draws"]] == [0, 1]
    assert [d["draw"] for d in result["probe"]["0"]["draws"]] == [0] and result["probe"]["0"]["n"] == 45
    assert set(result["finetune"]) == {"6"} and len(result["finetune"]["6"]["draws"]) == 1
    assert result["finetune"]["6"]["draws"][0]["lr"] in (1e-3, 3e-3)
    mean = sum(d["accuracy"] for d in result["probe"]["6"]["draws"]) / 2
    assert result["probe"]["6"]["accuracy"] == pytest.approx(mean)

    # What the models read: the first max_tokens tokens' text.
    text = task["text"][0]
    cut = read_prefixes([text], tokenizer, 6)[0]
    assert text.startswith(cut) and len(tokenizer.encode(cut, add_special_tokens=False).ids) == 6
    # The keyword decides the label; with a reading window that holds it, the bag of words solves the task.
    bow = bag_of_words(tokenizer, task, [6, 0], seed=1, settings=settings)
    assert bow["bow"]["0"]["accuracy"] >= result["probe"]["0"]["accuracy"] - 1e-9
    wide = bag_of_words(tokenizer, task, [0], seed=1, settings=TransferSettings(max_tokens=64, dev_docs=15))
    assert wide["bow"]["0"]["accuracy"] == 1.0 and wide["bow"]["0"]["draws"][0]["c"] in wide["settings"]["bow_c"]


def test_dev_ranking_prefers_accuracy_over_a_cautious_loss():
    """A classifier near the uniform guess has a low loss at chance accuracy; it is not chosen over
    one that is right more often."""
    from trainer.transfer import _key

    assert _key({"accuracy": 0.5, "loss": 2.0}) < _key({"accuracy": 0.2, "loss": 1.61})
    assert _key({"accuracy": 0.5, "loss": 1.0}) < _key({"accuracy": 0.5, "loss": 1.2})


def test_transfer_runs_only_for_the_variants_named(monkeypatch):
    """`[task] variants` limits the transfer runs (random init and the bag of words besides); with
    none named, neither reference runs, and follow-ups go to the variants they name."""
    import flows.experiment as experiment
    from experiment.config import parse_experiment

    ran = []
    monkeypatch.setattr(experiment, "pretrain_task", lambda variant, seed, train_config: {"v": variant})
    monkeypatch.setattr(experiment, "transfer_task", lambda **p: ran.append(("transfer", p["model"])) or {})
    config = parse_experiment(
        {
            "out_dir": "out",
            "demo": True,
            "budget_tokens": 1000,
            "seeds": [0],
            "variants": [{"name": "a"}, {"name": "b"}],
        }
    )
    pretraining = {(name, 0): dict(variant=name, seed=0, train_config=None) for name in ("a", "b")}

    def followup(**p):
        ran.append(("scores", p["model"]))
        return {}

    models = experiment._run_models(
        config,
        pretraining,
        lambda name, seed: {"model": name},
        {"scores": (followup, lambda n, s: {"model": n}, {"b"})},
        transferred={"a"},
    )
    assert sorted(ran) == [("scores", "b"), ("transfer", "a"), ("transfer", "bag-of-words"), ("transfer", "random")]
    assert list(models["transfer"]) == ["random", "bag-of-words", "a"] and list(models["scores"]) == ["b"]
    ran.clear()
    experiment._run_models(config, pretraining, lambda name, seed: {"model": name}, transferred=set())
    assert ran == []


def test_balanced_accuracy_does_not_reward_answering_the_majority_class():
    from trainer.transfer import _scores

    targets = torch.tensor([0, 0, 0, 0, 0, 0, 1, 2])
    always_zero = torch.tensor([[1.0, 0.0, 0.0]] * 8)
    scores = _scores(always_zero, targets)
    assert scores["accuracy"] == pytest.approx(0.75)
    assert scores["balanced_accuracy"] == pytest.approx(1 / 3)  # recalls 1, 0, 0
    perfect = torch.nn.functional.one_hot(targets, 3).float()
    assert _scores(perfect, targets)["balanced_accuracy"] == pytest.approx(1.0)
