"""Mixing: groups, temperature and explicit weights, UniMax epoch caps, the sampling plan, the
held-out split, decontamination and the report, on numbers worked out by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest

from pipeline.formats import hashing
from pipeline.formats.hashing import seeded_id_hash
from pipeline.mix import plan as mix
from pipeline.mix.plan import (
    EpochCaps,
    assign_groups,
    cap_epochs,
    drop_contaminated,
    explicit_weights,
    group_sizes,
    mixture_report,
    sample_plan,
    seeded_id_uniform,
    split_validation,
    temperature_weights,
)
from pipeline.mix.shards import SplitJob, split_candidates

M64 = (1 << 64) - 1


def fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & M64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & M64
    return h ^ (h >> 33)


def reference_hash(text: str, seed: int, salt: int = 0) -> int:
    """The documented formula, one id at a time in plain Python."""
    key = fmix64((seed ^ salt) & M64)
    data = text.encode("utf-8")
    total = sum(fmix64(key ^ ((j << 8) | byte)) for j, byte in enumerate(data)) & M64
    return fmix64((total + len(data) * 0x9E3779B97F4A7C15 + key) & M64)


def corpus(sizes: dict[str, int], seed: int = 0, low: int = 1, high: int = 200) -> pl.DataFrame:
    """Documents of random token counts, ``sizes[g]`` documents in group g."""
    rng = np.random.default_rng(seed)
    frames = []
    for name, count in sizes.items():
        frames.append(
            pl.DataFrame(
                {
                    "id": [f"{name}-{i:06d}" for i in range(count)],
                    "group": [name] * count,
                    "tokens": rng.integers(low, high, size=count),
                }
            )
        )
    return pl.concat(frames)


# ------------------------------------------------------------------------------------- hashes


def test_seeded_id_hash_matches_the_formula():
    ids = ["doc-1", "", "é文", "a" * 300, "doc-2"]
    got = seeded_id_hash(pl.Series(ids), seed=7, salt=mix.SALT_SAMPLE)
    assert got.dtype == np.uint64
    assert [int(v) for v in got] == [reference_hash(t, 7, mix.SALT_SAMPLE) for t in ids]


def test_seeded_id_hash_pieces_do_not_change_it(monkeypatch):
    ids = [f"id-{i}-{'x' * (i % 37)}" for i in range(3000)]
    whole = seeded_id_hash(ids, seed=3)
    monkeypatch.setattr(hashing, "HASH_CHUNK_BYTES", 64)
    assert np.array_equal(seeded_id_hash(ids, seed=3), whole)
    # a sliced arrow array (offset != 0) hashes the same
    assert np.array_equal(seeded_id_hash(pl.Series(ids)[1000:2000], seed=3), whole[1000:2000])


def test_seeded_id_uniform_is_uniform_and_seeded():
    ids = [f"doc-{i}" for i in range(50_000)]
    u = seeded_id_uniform(ids, seed=1)
    assert u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.01
    assert np.histogram(u, bins=10, range=(0, 1))[0].min() > 4_500
    assert len(np.unique(seeded_id_hash(ids, seed=1))) == len(ids)
    assert (seeded_id_hash(ids, seed=1) != seeded_id_hash(ids, seed=2)).mean() > 0.999
    with pytest.raises(ValueError, match="have a null id"):
        seeded_id_hash(pl.Series(["a", None]), seed=1)


# ------------------------------------------------------------------------------------- groups


def test_assign_groups_names_and_merges():
    docs = pl.DataFrame(
        {
            "id": [str(i) for i in range(10)],
            "source": ["news"] * 6 + ["web"] * 4,
            "lang": ["en", "en", "en", "de", "de", None, "en", "en", "sw", "en"],
            "tokens": [1, 1, 1, 1, 1, 1, 1, 1, 100, 1],
        }
    )
    assert assign_groups(docs, ["source"]).to_list() == ["news"] * 6 + ["web"] * 4
    assert assign_groups(docs, ["lang"]).to_list() == ["en", "en", "en", "de", "de", "und", "en", "en", "sw", "en"]
    both = assign_groups(docs, ["source", "lang"])
    assert both.name == "group"
    assert both.to_list()[:6] == ["news/en"] * 3 + ["news/de"] * 2 + ["news/und"]
    assert assign_groups(docs, ["lang", "source"])[0] == "en/news"

    # explicit mapping of whole names
    merged = assign_groups(docs, ["source", "lang"], merge={"news/de": "news/other", "absent": "x"})
    assert merged.to_list()[3:5] == ["news/other"] * 2
    # languages under 15% of the documents: de (2/10) stays, und and sw (1/10 each) become other
    small = assign_groups(docs, ["lang"], min_share=0.15)
    assert small.to_list() == ["en", "en", "en", "de", "de", "other", "en", "en", "other", "en"]
    # by tokens, sw is 100/109 of the corpus and every other language is under 15%
    by_tokens = assign_groups(docs, ["lang"], min_share=0.15, size_column="tokens", other="rest")
    assert by_tokens.to_list() == ["rest"] * 8 + ["sw", "rest"]


def test_merge_and_weights_keys_name_a_language_group_by_any_code_of_it():
    from pipeline.formats.configfile import ConfigError
    from pipeline.mix.shards import group_documents

    docs = pl.DataFrame({"id": ["1", "2", "3"], "source": ["news", "news", "web"], "lang": ["en", "de", "en"]})
    # eng, eng_Latn and deu name the groups of en and de (the lang stage's codes): not ignored
    merged = assign_groups(docs, ["source", "lang"], merge={"news/eng_Latn": "news/english", "web/eng": "x"})
    assert merged.to_list() == ["news/english", "news/de", "x"]
    assert assign_groups(docs, ["lang"], merge={"deu": "german"}).to_list() == ["en", "german", "en"]
    assert explicit_weights({"eng": 3, "de_DE": 1}, ["en", "de"], by=["lang"]) == {"en": 0.75, "de": 0.25}
    # a source is no language: a source named en is not the group of the key eng
    with pytest.raises(ValueError, match=r"unknown group 'eng'; the groups are \['de', 'en'\]"):
        explicit_weights({"eng": 1}, ["en", "de"], by=["source"])
    with pytest.raises(ValueError, match=r"mix weights: 'en' and 'eng' name one group \('en'\); keep one"):
        explicit_weights({"en": 1, "eng": 1}, ["en"], by=["lang"])
    with pytest.raises(ValueError, match=r"'zh' names the groups \['zho_Hans', 'zho_Hant'\].*as it is written"):
        explicit_weights({"zh": 1}, ["zho_Hans", "zho_Hant"], by=["lang"])
    with pytest.raises(ConfigError, match=r"^mix merge: 'en' and 'eng' name one group \('en'\)"):
        group_documents(docs, ["lang"], {"en": "a", "eng": "b"})


def test_assign_groups_errors():
    docs = pl.DataFrame({"id": ["1", "2"], "source": ["a/b", "c"], "lang": ["en", "en"]})
    with pytest.raises(ValueError, match="contains '/'"):
        assign_groups(docs, ["source"])
    with pytest.raises(ValueError, match="no column 'quality'"):
        assign_groups(docs, ["quality"])
    with pytest.raises(ValueError, match="`by` is empty"):
        assign_groups(docs, [])


def test_group_sizes_in_tokens_or_documents():
    docs = pl.DataFrame({"group": ["b", "a", "b"], "tokens": [5, 7, 11]})
    assert group_sizes(docs) == {"a": 7, "b": 16}
    assert group_sizes(docs, tokens=None) == {"a": 1, "b": 2}
    assert list(group_sizes(docs)) == ["a", "b"]


# ------------------------------------------------------------------------------------- weights


def test_temperature_weights_by_hand():
    sizes = {"a": 900, "b": 100}
    assert temperature_weights(sizes, 1.0) == pytest.approx({"a": 0.9, "b": 0.1}, abs=1e-12)
    assert temperature_weights(sizes, 2.0) == pytest.approx({"a": 0.75, "b": 0.25}, abs=1e-12)
    assert temperature_weights(sizes, 1e9) == pytest.approx({"a": 0.5, "b": 0.5}, abs=1e-8)
    assert temperature_weights(sizes, math.inf) == {"a": 0.5, "b": 0.5}
    # alpha = 0.3 (mT5, XLM-R): 0.9^0.3 / (0.9^0.3 + 0.1^0.3)
    alpha = temperature_weights(sizes, 1 / 0.3)
    assert alpha["a"] == pytest.approx(0.9**0.3 / (0.9**0.3 + 0.1**0.3), rel=1e-12)
    assert alpha["a"] == pytest.approx(0.6591, abs=1e-4)
    # an empty group gets nothing, at any temperature
    assert temperature_weights({"a": 10, "b": 0}, math.inf) == {"a": 1.0, "b": 0.0}
    assert sum(temperature_weights({"x": 3, "y": 5, "z": 1_000_000}, 3.3).values()) == pytest.approx(1.0)


def test_temperature_weights_errors():
    with pytest.raises(ValueError, match="temperature=0"):
        temperature_weights({"a": 1}, 0)
    with pytest.raises(ValueError, match="group 'b' has size -1"):
        temperature_weights({"a": 1, "b": -1}, 1)
    with pytest.raises(ValueError, match="every group has size 0"):
        temperature_weights({"a": 0}, 1)


def test_explicit_weights_normalized_and_validated():
    groups = ["en", "de", "sw"]
    assert explicit_weights({"en": 2, "de": 1, "sw": 1}, groups) == {"en": 0.5, "de": 0.25, "sw": 0.25}
    assert explicit_weights({"en": 3}, groups, default=1) == {"en": 0.6, "de": 0.2, "sw": 0.2}
    assert explicit_weights({"en": 1, "de": 0, "sw": 0}, groups) == {"en": 1.0, "de": 0.0, "sw": 0.0}
    with pytest.raises(ValueError, match=r"unknown group 'fr'.*fix the name in the config"):
        explicit_weights({"en": 1, "de": 1, "sw": 1, "fr": 1}, groups)
    with pytest.raises(ValueError, match=r"group 'de' has negative weight -1.*weights must be >= 0"):
        explicit_weights({"en": 1, "de": -1, "sw": 1}, groups)
    with pytest.raises(ValueError, match=r"every weight is 0.*give at least one group a positive weight"):
        explicit_weights({"en": 0, "de": 0, "sw": 0}, groups)
    with pytest.raises(ValueError, match=r"no weight for group 'de' \(and 1 more: \['sw'\]\).*set a default"):
        explicit_weights({"en": 1}, groups)
    with pytest.raises(ValueError, match="group 'en' has weight nan"):
        explicit_weights({"en": float("nan"), "de": 1, "sw": 1}, groups)


# ------------------------------------------------------------------------------------- epoch caps


def iterative_caps(weights: dict, sizes: dict, budget: float, max_epochs: float) -> dict:
    """The textbook iteration: share by weight, cap, hand the excess to the uncapped, repeat."""
    taken = {g: 0.0 for g in sizes}
    free = {g for g in sizes if weights[g] > 0}
    left = budget
    while free:
        weight = sum(weights[g] for g in free)
        over = {g for g in free if left * weights[g] / weight >= max_epochs * sizes[g]}
        if not over:
            for g in free:
                taken[g] = left * weights[g] / weight
            break
        for g in over:
            taken[g] = max_epochs * sizes[g]
            left -= taken[g]
        free -= over
    return taken


def test_unimax_caps_by_hand():
    # Uniform weights are UniMax: c (10 tokens) takes 2 epochs = 20, b then wants 880/2 = 440 > 200
    # and takes 200, a takes the 680 left.
    sizes = {"a": 1000, "b": 100, "c": 10}
    caps = cap_epochs({"a": 1, "b": 1, "c": 1}, sizes, 900, max_epochs=2)
    assert caps.tokens_taken == {"a": 680, "b": 200, "c": 20}
    assert caps.epochs == {"a": 0.68, "b": 2.0, "c": 2.0}
    assert caps.effective_weights == pytest.approx({"a": 680 / 900, "b": 200 / 900, "c": 20 / 900})
    assert caps.capped == ("b", "c")
    assert caps.shortfall_tokens == 0 and caps.total_tokens == 900
    taken, epochs, effective = caps  # unpacks as a triple
    assert taken is caps.tokens_taken and epochs is caps.epochs and effective is caps.effective_weights


def test_unimax_on_published_figures():
    # The example of the unimax_sampling package (characters of five FineWeb-2 languages, a budget
    # of 250e9, 4 epochs): fao and isl take 4 epochs, the rest split what is left evenly,
    # 69230291658.67 each.
    counts = {"swe": 179955884499, "fas": 184595788282, "ekk": 42541080893, "isl": 10027573389, "fao": 549707867}
    caps = cap_epochs({name: 1 for name in counts}, counts, 250_000_000_000, max_epochs=4)
    assert caps.tokens_taken == {
        "ekk": 69230291659,
        "fao": 2198831468,
        "fas": 69230291659,
        "isl": 40110293556,
        "swe": 69230291658,
    }
    assert caps.capped == ("fao", "isl")
    assert caps.epochs["ekk"] == pytest.approx(1.627375003300828)
    assert caps.epochs["swe"] == pytest.approx(0.3847070177860806)
    assert caps.effective_weights["isl"] == pytest.approx(0.160441174224)


def test_numpy_numbers_are_accepted():
    sizes = {"a": np.int64(900), "b": np.int64(100)}
    weights = temperature_weights(sizes, np.float64(2.0))
    caps = cap_epochs(weights, sizes, np.int64(1000), np.int64(2))
    assert caps.tokens_taken == {"a": 800, "b": 200}
    docs = corpus({"a": 10})
    assert sample_plan(docs, {"a": np.int64(50)}, seed=0).height == 10


def test_temperature_weights_with_caps_by_hand():
    # T=2 gives 0.75 / 0.25; b's 250 of 1000 exceed 2 x 100, so b takes 200 and a the other 800.
    sizes = {"a": 900, "b": 100}
    caps = cap_epochs(temperature_weights(sizes, 2.0), sizes, 1000, max_epochs=2)
    assert caps.tokens_taken == {"a": 800, "b": 200}
    assert caps.epochs == {"a": pytest.approx(800 / 900), "b": 2.0}
    assert caps.effective_weights == {"a": 0.8, "b": 0.2}
    assert caps.target_weights == pytest.approx({"a": 0.75, "b": 0.25})
    # no cap: the weights are spent as they are
    assert cap_epochs(temperature_weights(sizes, 2.0), sizes, 1000, None).tokens_taken == {"a": 750, "b": 250}


def test_caps_redistribute_in_proportion_to_weights():
    # c is capped at 1 x 50; its excess goes to a and b 3:1.
    sizes = {"a": 10_000, "b": 10_000, "c": 50}
    caps = cap_epochs({"a": 3, "b": 1, "c": 4}, sizes, 800, max_epochs=1)
    # c wants 400, takes 50; 750 left for a and b at 3:1
    # 562.5 / 187.5: equal remainders, the extra token goes to the smaller name
    assert caps.tokens_taken == {"a": 563, "b": 187, "c": 50}
    assert sum(caps.tokens_taken.values()) == 800


def test_caps_when_every_group_is_capped_report_the_shortfall():
    caps = cap_epochs({"a": 1, "b": 1}, {"a": 100, "b": 50}, 1000, max_epochs=3)
    assert caps.tokens_taken == {"a": 300, "b": 150}
    assert caps.capped == ("a", "b")
    assert caps.shortfall_tokens == 550 and caps.total_tokens == 450
    assert caps.effective_weights == {"a": 2 / 3, "b": 1 / 3}


def test_caps_rounding_and_zero_weights():
    caps = cap_epochs({"a": 1, "b": 1, "c": 1, "d": 0}, {"a": 100, "b": 100, "c": 100, "d": 100}, 100, 5)
    assert caps.tokens_taken == {"a": 34, "b": 33, "c": 33, "d": 0}
    # fractional epochs: caps are floor(max_epochs x size)
    caps = cap_epochs({"a": 1, "b": 1}, {"a": 1000, "b": 7}, 500, max_epochs=2.5)
    assert caps.tokens_taken == {"a": 483, "b": 17}
    # a weighted group with no data is capped at 0 and its share goes to the others
    caps = cap_epochs({"a": 1, "b": 1}, {"a": 1000, "b": 0}, 500, max_epochs=4)
    assert caps.tokens_taken == {"a": 500, "b": 0} and caps.epochs["b"] == 0.0


def test_caps_equal_the_iteration_on_random_instances():
    rng = np.random.default_rng(5)
    for _ in range(200):
        k = int(rng.integers(1, 8))
        names = [f"g{i}" for i in range(k)]
        sizes = {g: int(rng.integers(0, 10_000)) for g in names}
        weights = {g: float(rng.choice([0.0, rng.random()])) for g in names}
        if sum(weights.values()) == 0:
            weights[names[0]] = 1.0
        budget = int(rng.integers(0, 60_000))
        max_epochs = int(rng.integers(1, 6))
        caps = cap_epochs(weights, sizes, budget, max_epochs)
        expected = iterative_caps(weights, sizes, budget, max_epochs)
        for g in names:
            assert abs(caps.tokens_taken[g] - expected[g]) < 1.0 + 1e-6
            assert caps.tokens_taken[g] <= max_epochs * sizes[g]
        assert caps.total_tokens + caps.shortfall_tokens == budget
        if caps.shortfall_tokens:
            assert all(caps.tokens_taken[g] == max_epochs * sizes[g] for g in names if weights[g] > 0)


def test_cap_epochs_errors():
    with pytest.raises(ValueError, match=r"weights only: \['c'\]"):
        cap_epochs({"a": 1, "c": 1}, {"a": 10}, 10, 1)
    with pytest.raises(ValueError, match="max_epochs=0"):
        cap_epochs({"a": 1}, {"a": 10}, 10, 0)
    with pytest.raises(ValueError, match="budget_tokens=-5"):
        cap_epochs({"a": 1}, {"a": 10}, -5, 1)
    with pytest.raises(ValueError, match="group 'a' has weight -1"):
        cap_epochs({"a": -1, "b": 2}, {"a": 10, "b": 10}, 10, 1)


# ------------------------------------------------------------------------------------- sampling plan


def test_sample_plan_by_hand():
    docs = pl.DataFrame(
        {
            "id": ["a1", "a2", "a3", "a4", "b1", "b2", "c1"],
            "group": ["a"] * 4 + ["b"] * 2 + ["c"],
            "tokens": [10, 10, 10, 10, 7, 3, 5],
        }
    )
    # a: 25 of 40 tokens: two documents make 20, a third makes 30 (as near 25 as 20: taken);
    # b: 2.5 epochs of 10 tokens = 25: both twice, then b2 (3) or b1 (7) by the hash order;
    # c: not listed, not taken.
    plan = sample_plan(docs, {"a": 25, "b": 25}, seed=0)
    assert plan.columns == ["id", "group", "repeats"]
    assert plan["id"].to_list() == docs["id"].to_list()
    repeats = dict(zip(plan["id"], plan["repeats"]))
    assert sorted(repeats[i] for i in ["a1", "a2", "a3", "a4"]) == [0, 1, 1, 1]
    assert sorted([repeats["b1"], repeats["b2"]]) == [2, 3]
    assert repeats["c1"] == 0
    # b's last 5 tokens: in the hash order of (seed, id), b1 first makes 20 + 7 = 27 (2 over, nearer
    # than stopping 5 short: taken); b2 first makes 23, and then b1 would make 30 (5 over, farther
    # than 2 short): stop.
    keys = seeded_id_hash(["b1", "b2"], 0, mix.SALT_SAMPLE)
    if keys[0] < keys[1]:
        assert (repeats["b1"], repeats["b2"]) == (3, 2)
    else:
        assert (repeats["b1"], repeats["b2"]) == (2, 3)
    # over seeds, both orders happen
    firsts = {tuple(sample_plan(docs, {"b": 25}, seed=s).filter(pl.col("group") == "b")["repeats"]) for s in range(20)}
    assert firsts == {(3, 2), (2, 3)}


def test_sample_plan_hits_targets_within_one_document():
    docs = corpus({"big": 3000, "mid": 400, "small": 40}, seed=1)
    sizes = group_sizes(docs)
    caps = cap_epochs(temperature_weights(sizes, 3.33), sizes, sum(sizes.values()) // 2, max_epochs=4)
    plan = sample_plan(docs, caps.tokens_taken, seed=11)
    used = (
        docs.join(plan, on=["id", "group"])
        .group_by("group")
        .agg(taken=(pl.col("tokens") * pl.col("repeats")).sum(), largest=pl.col("tokens").max())
    )
    for name, taken, largest in used.iter_rows():
        target = caps.tokens_taken[name]
        assert abs(taken - target) <= largest / 2, (name, taken, target)
    # the small group is upsampled: every document at least floor(epochs) times, at most one more
    small = plan.filter(pl.col("group") == "small")["repeats"]
    epochs = caps.epochs["small"]
    assert epochs > 1
    assert small.min() >= math.floor(epochs) and small.max() <= math.floor(epochs) + 1
    assert plan["repeats"].max() <= 4


def test_sample_plan_is_deterministic_and_order_independent():
    docs = corpus({"x": 500, "y": 300}, seed=2)
    targets = {"x": 20_000, "y": 70_000}
    plan = sample_plan(docs, targets, seed=42)
    assert plan.equals(sample_plan(docs, targets, seed=42))
    shuffled = docs.sample(fraction=1.0, shuffle=True, seed=9)
    assert not shuffled["id"].equals(docs["id"])
    again = sample_plan(shuffled, targets, seed=42)
    assert again["id"].equals(shuffled["id"])  # rows line up with the input
    assert again.sort("id").equals(plan.sort("id"))
    other = sample_plan(docs, targets, seed=43)
    assert not other["repeats"].equals(plan["repeats"])


def test_sample_plan_errors():
    docs = pl.DataFrame({"id": ["a", "a"], "group": ["g", "g"], "tokens": [1, 1]})
    with pytest.raises(ValueError, match="id 'a' appears more than once"):
        sample_plan(docs, {"g": 1}, seed=0)
    docs = pl.DataFrame({"id": ["a"], "group": ["g"], "tokens": [1]})
    with pytest.raises(ValueError, match="group 'h' should supply 5 tokens but has no documents"):
        sample_plan(docs, {"h": 5}, seed=0)
    with pytest.raises(ValueError, match="no 'tokens' column"):
        sample_plan(docs.drop("tokens"), {"g": 1}, seed=0)


# ------------------------------------------------------------------------------------- validation split


def test_split_validation_fraction_disjoint_and_stable():
    docs = corpus({"en": 10_000, "de": 5_000}, seed=3)
    train, validation = split_validation(docs, 0.1, None, seed=4)
    assert train.name == "id" and validation.name == "id"
    assert len(train) + len(validation) == docs.height
    assert not set(train.to_list()) & set(validation.to_list())
    assert set(train.to_list()) | set(validation.to_list()) == set(docs["id"].to_list())
    held = docs.filter(pl.col("id").is_in(validation.implode()))
    for name, n in (("en", 10_000), ("de", 5_000)):
        count = held.filter(pl.col("group") == name).height
        sigma = math.sqrt(n * 0.1 * 0.9)
        assert abs(count - 0.1 * n) < 4 * sigma, (name, count)
    # order independent, seeded, independent of the sampling order's salt
    shuffled = docs.sample(fraction=1.0, shuffle=True, seed=1)
    train2, validation2 = split_validation(shuffled, 0.1, None, seed=4)
    assert set(validation2.to_list()) == set(validation.to_list())
    assert set(split_validation(docs, 0.1, None, seed=5)[1].to_list()) != set(validation.to_list())
    # a document's side depends on its id: half the corpus gives the same sides to its documents
    half = docs.filter(pl.col("group") == "de")
    held_de = set(held.filter(pl.col("group") == "de")["id"].to_list())
    assert set(split_validation(half, 0.1, None, seed=4)[1].to_list()) == held_de


def test_split_validation_cap_per_group():
    docs = corpus({"en": 10_000, "de": 300}, seed=3)
    _, uncapped = split_validation(docs, 0.1, None, seed=4)
    train, capped = split_validation(docs, 0.1, 50, seed=4)
    held = docs.filter(pl.col("id").is_in(capped.implode()))
    assert held.filter(pl.col("group") == "en").height == 50
    de_uncapped = docs.filter(pl.col("id").is_in(uncapped.implode()) & (pl.col("group") == "de")).height
    assert held.filter(pl.col("group") == "de").height == min(50, de_uncapped)
    assert set(capped.to_list()) <= set(uncapped.to_list())
    assert len(train) + len(capped) == docs.height
    # the capped ones are those of smallest u
    u = dict(zip(docs["id"].to_list(), seeded_id_uniform(docs["id"], 4, mix.SALT_VALIDATION)))
    en_kept = sorted(u[i] for i in held.filter(pl.col("group") == "en")["id"])
    en_all = sorted(u[i] for i in docs.filter(pl.col("id").is_in(uncapped.implode()) & (pl.col("group") == "en"))["id"])
    assert en_kept == en_all[:50]
    assert split_validation(docs, 0.0, None, seed=4)[1].len() == 0


def test_split_validation_holds_out_a_minimum_per_group_where_it_has_the_documents():
    docs = corpus({"big": 5_000, "mid": 40, "small": 9, "tiny": 3}, seed=3)
    _, plain = split_validation(docs, 0.01, 1_000, seed=4)
    _, validation = split_validation(docs, 0.01, 1_000, seed=4, min_docs=10)
    held = docs.filter(pl.col("id").is_in(validation.implode()))
    counts = dict(held.group_by("group").len().iter_rows())
    big = plain.filter(plain.str.starts_with("big")).len()
    assert big > 10 and counts["big"] == big  # the fraction already holds out more than the minimum
    # a quarter of its documents at most: 10 of 40, 2 of 9, none of 3
    assert (counts["mid"], counts["small"], counts.get("tiny", 0)) == (10, 2, 0)
    # the documents of smallest hash, those the fraction holds out among them
    u = dict(zip(docs["id"].to_list(), seeded_id_uniform(docs["id"], 4, mix.SALT_VALIDATION)))
    for group in ("mid", "small"):
        ids = docs.filter(pl.col("group") == group)["id"].to_list()
        assert sorted(held.filter(pl.col("group") == group)["id"]) == sorted(sorted(ids, key=u.get)[: counts[group]])
    assert set(plain.to_list()) <= set(validation.to_list())
    # the cap still caps; no fraction, no split; no minimum, the split as it was
    capped = docs.filter(pl.col("id").is_in(split_validation(docs, 0.01, 5, seed=4, min_docs=10)[1].implode()))
    assert capped.group_by("group").len()["len"].max() == 5
    assert split_validation(docs, 0.0, None, seed=4, min_docs=10)[1].len() == 0
    assert split_validation(docs, 0.01, None, seed=4, min_docs=0)[1].equals(
        split_validation(docs, 0.01, None, seed=4)[1]
    )
    with pytest.raises(ValueError, match="min_docs=-1"):
        split_validation(docs, 0.1, None, seed=0, min_docs=-1)


@pytest.mark.parametrize(
    "fraction, max_docs, min_docs", [(0.01, 1_000, 10), (0.2, 6, 4), (0.05, None, 30), (0.3, 2, 0)]
)
def test_the_split_of_block_candidates_is_the_split_of_the_whole_pool(tmp_path, fraction, max_docs, min_docs):
    docs = corpus({"big": 2_000, "mid": 60, "small": 13, "tiny": 2}, seed=5).sample(fraction=1.0, shuffle=True, seed=2)
    scans = []
    for shard in range(12):
        scans.append(tmp_path / f"scan-{shard:04d}.parquet")
        part = docs.gather_every(12, offset=shard).with_columns(shard=pl.lit(shard, pl.Int32))
        part.select("id", "group", "shard").write_parquet(scans[-1])
    excluded = pl.Series("id", ["mid-000003", "big-000007"])
    found = [
        split_candidates(
            SplitJob(
                unit=f"split-{b}",
                scans=scans[b * 5 : b * 5 + 5],
                renamed={},
                excluded=excluded,
                fraction=fraction,
                max_docs=max_docs,
                seed=9,
                min_docs=min_docs,
            )
        )
        for b in range(3)
    ]
    candidates = pl.concat([block.candidates for block in found])
    sizes: dict[str, int] = {}
    for block in found:
        for group, count in block.documents.items():
            sizes[group] = sizes.get(group, 0) + count
    pool = docs.filter(~pl.col("id").is_in(excluded.implode()))
    assert sizes == dict(pool.group_by("group").len().iter_rows())
    _, held = split_validation(candidates, fraction, max_docs, 9, min_docs=min_docs, sizes=sizes)
    _, expected = split_validation(pool, fraction, max_docs, 9, min_docs=min_docs)
    assert sorted(held.to_list()) == sorted(expected.to_list())


def test_validation_warning_names_what_is_too_small():
    # The split of 754 real pages: 2 documents, 1,303 tokens, none of the WARC group.
    groups = {
        "web": {"documents": 670, "validation_documents": 2, "validation_tokens": 1_303},
        "warc": {"documents": 84, "validation_documents": 0, "validation_tokens": 0},
    }
    assert mix.validation_warning(groups, 10) == (
        "the validation split is too small to measure: 2 documents and 1,303 tokens in all (under 10,000); "
        "no held-out text in warc (84 documents); under 10 held-out documents in web (2 of 670); "
        "raise mix.validation_fraction or mix.validation_min_docs, or add documents"
    )
    groups = {
        "web": {"documents": 670, "validation_documents": 10, "validation_tokens": 8_000},
        "warc": {"documents": 84, "validation_documents": 10, "validation_tokens": 6_000},
    }
    assert mix.validation_warning(groups, 10) is None


def test_validation_warning_counts_one_in_the_singular():
    groups = {"de": {"documents": 1, "validation_documents": 1, "validation_tokens": 1}}
    assert mix.validation_warning(groups, 2) == (
        "the validation split is too small to measure: 1 document and 1 token in all (under 10,000); "
        "under 2 held-out documents in de (1 of 1); "
        "raise mix.validation_fraction or mix.validation_min_docs, or add documents"
    )
    groups["en"] = {"documents": 1, "validation_documents": 0, "validation_tokens": 0}
    assert "no held-out text in en (1 document);" in mix.validation_warning(groups, 1)
    with pytest.raises(ValueError, match=r"^sample_plan: 1 document has no token count; "):
        mix.sample_plan(
            pl.DataFrame({"id": ["a"], "group": ["g"], "tokens": [None]}, schema_overrides={"tokens": pl.Int64}),
            {"g": 1},
            0,
        )


def test_split_validation_errors():
    docs = corpus({"en": 10})
    with pytest.raises(ValueError, match="fraction=1.5"):
        split_validation(docs, 1.5, None, seed=0)
    with pytest.raises(ValueError, match="max_docs=-1"):
        split_validation(docs, 0.1, -1, seed=0)


def test_drop_contaminated():
    train = pl.Series("id", ["t1", "t2", "t3", "t4"])
    pairs = pl.DataFrame({"train_id": ["t2", "t4", "t2"], "validation_id": ["v1", "v1", "v2"]})
    assert drop_contaminated(train, pairs).to_list() == ["t1", "t3"]
    assert drop_contaminated(["t1", "t2", "t3"], [("t3", "v9")]).to_list() == ["t1", "t2"]
    no_pairs = pl.DataFrame({"a": [], "b": []}, schema={"a": pl.String, "b": pl.String})
    assert drop_contaminated(train, no_pairs).len() == 4
    # unordered pairs (as dedup's edges come): with the validation ids, either side works, and
    # pairs of two training documents remove nothing
    edges = pl.DataFrame({"doc_a": ["v1", "t3", "t1"], "doc_b": ["t2", "v2", "t4"]})
    assert drop_contaminated(train, edges, validation_ids=["v1", "v2"]).to_list() == ["t1", "t4"]


# ------------------------------------------------------------------------------------- report


def test_mixture_report():
    docs = pl.DataFrame({"id": ["a1", "a2", "a3", "b1"], "group": ["a", "a", "a", "b"], "tokens": [300, 300, 300, 100]})
    sizes = group_sizes(docs)
    weights = temperature_weights(sizes, 2.0)
    caps = cap_epochs(weights, sizes, 1000, max_epochs=2)
    plan = sample_plan(docs, caps.tokens_taken, seed=0)
    report = mixture_report(docs, caps, plan)
    json.dumps(report)
    assert report["budget_tokens"] == 1000 and report["shortfall_tokens"] == 0 and report["max_epochs"] == 2.0
    a, b = report["groups"]["a"], report["groups"]["b"]
    assert b == {
        "documents_available": 1,
        "tokens_available": 100,
        "tokens_allocated": 200,
        "tokens_taken": 200,
        "documents_taken": 1,
        "epochs": 2.0,
        "effective_weight": 200 / 1100,
        "target_weight": pytest.approx(0.25),
        "capped": True,
    }
    # a: 800 of 900 tokens in whole documents of 300: 900 (100 over) is nearer than 600 (200 short)
    assert a["tokens_allocated"] == 800 and a["tokens_taken"] == 900 and a["documents_taken"] == 3
    assert a["epochs"] == 1.0 and a["effective_weight"] == pytest.approx(900 / 1100) and not a["capped"]
    assert report["tokens_taken"] == 1100 and report["tokens_allocated"] == 1000
    # without a plan, the allocation
    bare = mixture_report(docs, caps)
    assert bare["groups"]["a"]["tokens_taken"] == 800 and bare["groups"]["a"]["documents_taken"] is None
    with pytest.raises(ValueError, match="group 'a' has 600 tokens in the documents but 900"):
        mixture_report(docs.slice(1), caps)


def test_epoch_caps_is_a_dataclass():
    caps = cap_epochs({"a": 1}, {"a": 10}, 5, 1)
    assert isinstance(caps, EpochCaps) and caps.tokens_taken == {"a": 5}


def test_equal_hashes_fall_back_to_the_ids(monkeypatch):
    # Hashes that collide everywhere: the order within a group is then the ids' order, and a
    # repeated id is still found.
    monkeypatch.setattr(mix, "seeded_id_hash", lambda ids, seed, salt=0: np.zeros(len(ids), dtype=np.uint64))
    docs = pl.DataFrame({"id": ["d", "b", "c", "a"], "group": ["g"] * 4, "tokens": [1, 1, 1, 1]})
    plan = sample_plan(docs, {"g": 2}, seed=0)
    assert dict(zip(plan["id"], plan["repeats"])) == {"a": 1, "b": 1, "c": 0, "d": 0}
    _, validation = split_validation(docs, 0.5, 3, seed=0)  # u = 0 for all: held out, the cap keeps a, b, c
    assert validation.to_list() == ["b", "c", "a"]
    with pytest.raises(ValueError, match="id 'x' appears more than once"):
        sample_plan(pl.DataFrame({"id": ["x", "y", "x"], "group": ["g"] * 3, "tokens": [1, 1, 1]}), {"g": 1}, 0)
