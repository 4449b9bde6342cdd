"""What an experiment reuses on a rerun. It owns out_dir/tokenizer.json: it trains it again when
the tokenizer settings or its sample change, and refuses a tokenizer.json it did not write instead
of using it. A finished pretraining run is read back only for the mixture it was trained on."""

from __future__ import annotations

from types import SimpleNamespace

import polars as pl
import pytest

from experiment import prepare
from experiment.config import parse_experiment
from experiment.runs import pretrain
from pipeline.formats.configfile import ConfigError
from pipeline.formats.tokens import file_sha256, load_tokenizer
from pipeline.io.writer import write_json
from pipeline.tokenizer import train_tokenizer

WORDS = "the council met on monday to discuss the new budget and the plan for schools roads parks".split()
POOL = pl.DataFrame(
    {
        "id": [f"d{i:03d}" for i in range(120)],
        "text": [" ".join(WORDS[i % 7 :] + WORDS[: i % 7]) + f" item {i} of {i * 7}" for i in range(120)],
    }
)
INPUTS = SimpleNamespace(texts=POOL.head(0), canaries_path=None)


def _config(tmp_path, vocab_size: int = 300, sample_docs: int = 100):
    return parse_experiment(
        {
            "out_dir": str(tmp_path / "experiment"),
            "demo": True,
            "budget_tokens": 6000,
            "variants": [{"name": "raw"}],
            "tokenizer": {"vocab_size": vocab_size, "sample_docs": sample_docs},
        }
    )


@pytest.fixture
def trained(monkeypatch):
    """Every tokenizer pool_tokenizer trains, by its vocabulary size; the raw pool is POOL."""
    calls = []
    monkeypatch.setattr(prepare, "final_documents", lambda run: POOL)

    def counted(texts, path, vocab_size, **kwargs):
        calls.append(vocab_size)
        return train_tokenizer(texts, path, vocab_size=vocab_size, **kwargs)

    monkeypatch.setattr(prepare, "train_tokenizer", counted)
    return calls


def test_a_change_of_the_tokenizer_settings_trains_it_again(tmp_path, trained):
    config = _config(tmp_path)
    config.out_dir.mkdir(parents=True)
    path = prepare.pool_tokenizer(config, None, INPUTS)
    assert load_tokenizer(path).get_vocab_size() == 300 and trained == [300]
    assert prepare.pool_tokenizer(config, None, INPUTS) == path and trained == [300]  # the same: kept
    bigger = _config(tmp_path, vocab_size=290)
    assert load_tokenizer(prepare.pool_tokenizer(bigger, None, INPUTS)).get_vocab_size() == 290
    prepare.pool_tokenizer(_config(tmp_path, vocab_size=290, sample_docs=60), None, INPUTS)  # another sample
    assert trained == [300, 290, 290]
    assert not list(config.out_dir.glob(".tokenizer-*"))


@pytest.mark.parametrize("when", ["before the first run", "after a run"])
def test_a_tokenizer_json_the_experiment_did_not_write_is_refused_and_kept(tmp_path, trained, when):
    config = _config(tmp_path)
    config.out_dir.mkdir(parents=True)
    if when == "after a run":
        prepare.pool_tokenizer(config, None, INPUTS)
    mine = train_tokenizer(
        ["a user's own text", "trained elsewhere"] * 20, config.out_dir / "tokenizer.json", vocab_size=270
    )
    before = mine.read_bytes()
    for check in (prepare.owned_tokenizer, lambda c: prepare.pool_tokenizer(c, None, INPUTS)):
        with pytest.raises(ConfigError, match=r"tokenizer\.json: a tokenizer this experiment did not write") as error:
            check(config)
        assert "\n" not in str(error.value) and "move it out of out_dir" in str(error.value)
    assert mine.read_bytes() == before


def test_a_finished_run_on_another_mixture_is_not_read_back(tmp_path):
    """A new tokenizer (or curation) makes new mixtures; a summary of a run on the old one is refused."""
    mixture, out = tmp_path / "mix" / "raw", tmp_path / "train"
    mixture.mkdir(parents=True)
    out.mkdir()
    (mixture / "manifest.json").write_text('{"tokenizer": {"sha256": "old"}}')
    training = SimpleNamespace(out_dir=out, mixture=mixture, to_dict=lambda: {"seed": 0})
    summary = {"config": {"seed": 0}, "mixture_manifest_sha256": file_sha256(mixture / "manifest.json")}
    write_json(summary, out / "summary.json")
    assert pretrain(training) == summary
    (mixture / "manifest.json").write_text('{"tokenizer": {"sha256": "new"}}')
    with pytest.raises(ConfigError, match=r"^mixture: .*summary\.json was trained on another mixture") as error:
        pretrain(training)
    assert "\n" not in str(error.value)
