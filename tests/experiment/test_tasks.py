"""The built-in multiple-choice tasks: each item's right answer is the text's own next sentence,
last word or unedited sentence, its wrong answers come from where the module says, the items are
seeded, and only choices that fit the model's window are used."""

from __future__ import annotations

import polars as pl
import pytest

from experiment.tasks import (
    TOPIC_CONTEXT_BYTES,
    built_tasks,
    cloze_items,
    continuation_items,
    pair_items,
    topic_items,
    units,
    write_built_tasks,
)
from pipeline.formats.choices import read_choice_items

SENTENCES = [
    "The council approved the new budget for the coming year.",
    "Officials said the plan would cut waiting times at the hospital.",
    "Local shops reported a busy weekend before the holiday season.",
    "The museum will open a new gallery of modern paintings next month.",
    "Rain is expected across the region for most of the week.",
    "Teachers welcomed the extra funding for school libraries and books.",
    "The football club signed a young striker from a rival team.",
    "Engineers finished repairs on the old bridge ahead of schedule.",
]


def _texts(n: int = 12, lang: str | list[str] = "en") -> pl.DataFrame:
    rows = []
    for i in range(n):
        order = [SENTENCES[(i + k) % len(SENTENCES)] for k in range(5)]
        text = f"Headline number {i}\n\n" + " ".join(order[:3]) + "\n\n" + " ".join(order[3:])
        rows.append(
            {"id": f"doc-{i:02d}", "text": text, "lang": lang if isinstance(lang, str) else lang[i % len(lang)]}
        )
    return pl.DataFrame(rows)


def test_units_are_sentences_and_lines():
    text = "Title\n\nOne sentence here. Another one! A third?\nLast line"
    assert [text[a:b] for a, b in units(text)] == [
        "Title",
        "One sentence here.",
        "Another one!",
        "A third?",
        "Last line",
    ]
    assert [t for t in (lambda s: [s[a:b] for a, b in units(s)])("你好。再见！")] == ["你好。", "再见！"]


def test_continuation_the_right_ending_follows_its_context_and_the_wrong_ones_come_from_other_texts():
    texts = _texts()
    by_id = dict(zip(texts["id"], texts["text"]))
    items = continuation_items(texts, "continuation-x", 40, seed=0)
    assert items.height == 40 and items["id"].is_unique().all()
    for row in items.iter_rows(named=True):
        doc = row["id"].split("/")[1]
        gold = row["choices"][row["gold"]]
        assert row["context"] + gold in by_id[doc]  # the text as written, cut at a sentence
        assert len(row["choices"]) == len(set(row["choices"])) == 4
        wrong = [c for k, c in enumerate(row["choices"]) if k != row["gold"]]
        assert all(any(c in t for d, t in by_id.items() if d != doc) for c in wrong)
    # seeded: the same items again; another seed, others
    assert continuation_items(texts, "continuation-x", 40, seed=0).equals(items)
    assert not continuation_items(texts, "continuation-x", 40, seed=1).equals(items)
    # the right answer is not always in one place
    assert items["gold"].n_unique() == 4


def test_continuation_of_several_languages_draws_wrong_endings_within_the_language():
    texts = _texts(12, ["en", "de"])
    # make each language's sentences its own, so a wrong ending shows its language
    texts = texts.with_columns(
        text=pl.when(pl.col("lang") == "de").then(pl.col("text").str.replace_all("e", "ë")).otherwise("text")
    )
    lang_of = {s: lang for t, lang in zip(texts["text"], texts["lang"]) for s in [t[a:b] for a, b in units(t)]}
    items = continuation_items(texts, "continuation-x", 30, seed=0)
    assert set(items["group"]) == {"en", "de"}
    for row in items.iter_rows(named=True):
        assert all(lang_of.get(c, row["group"]) == row["group"] for c in row["choices"])


def test_cloze_the_answer_is_the_sentences_last_word_and_the_others_words_of_the_passage():
    texts = _texts()
    by_id = dict(zip(texts["id"], texts["text"]))
    items = cloze_items(texts, "cloze-x", 30, seed=0)
    assert items.height == 30
    for row in items.iter_rows(named=True):
        gold = row["choices"][row["gold"]]
        assert row["context"].endswith(" ") and (row["context"] + gold + ".") in by_id[row["id"].split("/")[1]]
        context_words = {w.strip(".,") for w in row["context"].split()}
        assert all(c in context_words for k, c in enumerate(row["choices"]) if k != row["gold"])
        assert len({c.lower() for c in row["choices"]}) == 4


def test_minimal_pairs_swap_two_adjacent_words_of_the_sentence_that_follows_the_context():
    texts = _texts()
    by_id = dict(zip(texts["id"], texts["text"]))
    items = pair_items(texts, "pairs-x", 30, seed=0)
    assert items.height == 30
    for row in items.iter_rows(named=True):
        original, broken = row["choices"][row["gold"]], row["choices"][1 - row["gold"]]
        assert row["context"] + original in by_id[row["id"].split("/")[1]]
        a, b = original.split(" "), broken.split(" ")
        differ = [k for k in range(len(a)) if a[k] != b[k]]
        assert len(differ) == 2 and differ[1] == differ[0] + 1 and sorted(a) == sorted(b)


def test_topic_items_put_k_labelled_train_examples_before_each_test_text():
    task = pl.DataFrame(
        {
            "id": [f"t{i}" for i in range(30)],
            "text": [f"Story {i} about {['money', 'games', 'votes'][i % 3]} " + "words " * 40 for i in range(30)],
            "label": [["business", "sport", "politics"][i % 3] for i in range(30)],
            "split": ["train"] * 20 + ["test"] * 10,
        }
    )
    for k in (0, 3):
        items = topic_items(task, k, seed=0)
        assert items.height == 10 and set(items["task"]) == {f"topic-{k}shot"}
        for row in items.iter_rows(named=True):
            assert row["choices"] == [" business", " politics", " sport"]
            assert row["context"].endswith("\nTopic:") and row["context"].count("\nTopic: ") == k
            label = task.filter(pl.col("id") == row["id"].split("/")[1])["label"][0]
            assert row["choices"][row["gold"]] == f" {label}"
            assert len(row["context"].encode()) <= TOPIC_CONTEXT_BYTES + len("\nTopic:")


def test_only_choices_that_fit_are_used_and_every_task_is_written_once(tmp_path):
    heldout = _texts().with_columns(set=pl.lit("news"), clean=pl.lit(True))
    short = {name: frame for name, frame in built_tasks(heldout, None, 20, [], 0, fits=lambda c: len(c) < 64)}
    assert set(short) == {"continuation-news", "cloze-news", "pairs-news"}
    assert all(len(c) < 64 for frame in short.values() for choices in frame["choices"] for c in choices)
    assert not dict(built_tasks(heldout, None, 20, [], 0, fits=lambda c: False))
    # a set that is not all English gets continuation only; junk (not clean) gets nothing
    german = _texts(6, "de").with_columns(id=pl.lit("de-") + pl.col("id"), set=pl.lit("news"), clean=pl.lit(True))
    mixed = pl.concat([heldout, german])
    junk = heldout.with_columns(set=pl.lit("junk"), clean=pl.lit(False), id=pl.lit("j-") + pl.col("id"))
    assert set(dict(built_tasks(pl.concat([mixed, junk]), None, 20, [], 0))) == {"continuation-news"}
    paths = write_built_tasks(tmp_path, heldout, None, 20, [], 0)
    stamps = [p.stat().st_mtime_ns for p in paths]
    assert [read_choice_items(p).height for p in paths] == [20, 20, 20]
    assert [p.stat().st_mtime_ns for p in write_built_tasks(tmp_path, heldout, None, 20, [], 0)] == stamps


@pytest.mark.parametrize("items", [5, 500])
def test_items_are_capped_and_spread_over_the_texts(items):
    texts = _texts()
    found = continuation_items(texts, "c", items, seed=0)
    assert found.height == min(items, found.height) <= items
    docs = found["id"].str.split("/").list.get(1)
    if items == 5:
        assert docs.n_unique() == 5  # one per text before any text gives two
