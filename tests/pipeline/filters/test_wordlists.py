"""C4's bad-words rule (pipeline.filters.wordlists): entries on word boundaries in any case,
phrases, one list per language, scripts without spaces, the entry each document matched, and a
list path that is wrong stopping with one line naming it."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.api import filter_documents
from pipeline.filters.wordlists import CHUNK_ENTRIES, RULE_LISTED_WORD, C4BadWords
from pipeline.formats.configfile import ConfigError
from tests.helpers import source_config


def write_list(path, entries: list[str]):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(entries) + "\n", encoding="utf-8")
    return path


def docs(texts: list[str], lang: str | None = "en") -> pl.DataFrame:
    langs = lang if isinstance(lang, list) else [lang] * len(texts)
    return pl.DataFrame(
        {"id": [f"d{i}" for i in range(len(texts))], "text": texts, "lang": langs}, schema_overrides={"lang": pl.String}
    )


def measured(flt: C4BadWords, frame: pl.DataFrame) -> tuple[list, list]:
    output = flt.apply(frame)
    return output.measures["has_listed_word"].to_list(), output.notes["match"].to_list()


@pytest.fixture
def lists(tmp_path):
    folder = tmp_path / "lists"
    write_list(folder / "en.txt", ["# a comment line", "", "ass", "Bad Phrase", "f*ck", "ärger"])
    write_list(folder / "de.txt", ["mist"])
    write_list(folder / "zh.txt", ["性交"])
    write_list(folder / "ja.txt", ["エロ"])
    return folder


def test_an_entry_matches_on_word_boundaries_in_any_case(lists):
    flt = C4BadWords(lists)
    texts = [
        "a class act, assess and passing",  # inside longer words: no match
        "you Ass!",
        "ass",  # the whole text
        "(ASS) at the start",
        "a bad phrase here",
        "a BAD PHRASE.",
        "bad phrases and badphrase and bad  phrase",  # neither a longer word nor other spacing
        "f*ck it",
        "fck and f-ck",  # the entry's regex characters are literal
        "so much ÄRGER today",  # Unicode case
        "the comment line is no entry: # a comment line",
    ]
    has, match = measured(flt, docs(texts))
    assert has == [0, 1, 1, 1, 1, 1, 0, 1, 0, 1, 0]
    assert match == [None, "ass", "ass", "ass", "Bad Phrase", "Bad Phrase", None, "f*ck", None, "ärger", None]


def test_each_language_has_its_own_list_and_one_without_a_list_passes(lists):
    flt = C4BadWords(lists)
    frame = docs(
        ["so ein mist", "so ein mist", "you ass", "you ass", "you ass", "you ass"],
        lang=["de", "deu_Latn", "de", "fr", None, "eng_Latn"],
    )
    has, match = measured(flt, frame)
    # German's list holds "mist", not "ass"; French has no list; no language: no list
    assert has == [1, 1, 0, None, None, 1]
    assert match == ["mist", "mist", None, None, None, "ass"]
    has, _ = measured(C4BadWords(lists, default_lang="en"), frame)
    assert has == [1, 1, 0, None, 1, 1]  # default_lang: the list for documents without a language


def test_scripts_without_spaces_match_inside_a_run_of_characters(lists, tmp_path):
    flt = C4BadWords(lists)
    frame = docs(["他们性交了", "没有问题", "これはエロい", "普通の文"], lang=["zh", "zho_Hans", "ja", "ja"])
    has, match = measured(flt, frame)
    assert has == [1, 0, 1, 0] and match == ["性交", None, "エロ", None]
    # the same entry in a language with spaces needs boundaries
    spaced = C4BadWords({"en": write_list(tmp_path / "en-han.txt", ["性交"])})
    assert measured(spaced, docs(["他们性交了", "他们 性交 了"]))[0] == [0, 1]


def test_a_list_longer_than_one_expression_matches_every_entry(tmp_path):
    entries = [f"word{i}x" for i in range(CHUNK_ENTRIES * 2 + 5)]
    flt = C4BadWords({"en": write_list(tmp_path / "big.txt", entries)})
    assert len(flt.patterns["en"]) == 3
    has, match = measured(flt, docs(["a word0x b", f"a {entries[-1]} b", f"a {entries[1500]}", "word1 x"]))
    assert has == [1, 1, 1, 0] and match == ["word0x", entries[-1], entries[1500], None]


def test_the_rule_removes_and_filter_documents_names_the_entry(lists):
    frame = docs(["a clean text", "you Ass!", "ein mist", "他们性交了"], lang=["en", "en", "de", "zh"])
    kept, removed = filter_documents(frame, {"filters": ["c4_badwords"], "params": {"c4_badwords": {"lists": lists}}})
    assert kept["id"].to_list() == ["d0"]
    assert removed.select("id", "rule", "value", "threshold", "match").rows() == [
        ("d1", RULE_LISTED_WORD, 1.0, 1.0, "ass"),
        ("d2", RULE_LISTED_WORD, 1.0, 1.0, "mist"),
        ("d3", RULE_LISTED_WORD, 1.0, 1.0, "性交"),
    ]
    # without a list filter the removed table is as it always was
    _, plain = filter_documents(frame, {"filters": ["c4_quality"]})
    assert "match" not in plain.columns


def test_a_table_of_lists_by_language(lists):
    flt = C4BadWords({"en": lists / "en.txt", "de": str(lists / "de.txt")})
    assert sorted(flt.files) == ["de", "en"]
    assert measured(flt, docs(["mist", "ass"], lang=["de", "en"]))[0] == [1, 1]


def test_a_clone_of_ldnoobw_is_a_folder_of_lists(tmp_path):
    """LDNOOBW's repository names its lists by code without a suffix, beside its README and
    other files, and has regional lists (de-AT) of a language it has a list of."""
    folder = tmp_path / "LDNOOBW"
    write_list(folder / "en", ["ass"])
    write_list(folder / "de", ["mist"])
    write_list(folder / "de-AT", ["oarsch"])
    for other in ("README.md", "USERS.md", "LICENSE", "words.json", "Australian Kriol bad words (work in progresss)"):
        write_list(folder / other, ["the", "and"])
    flt = C4BadWords(folder)
    assert flt.files == {"de": [str(folder / "de"), str(folder / "de-AT")], "en": [str(folder / "en")]}
    has, match = measured(flt, docs(["so ein mist", "du oarsch", "the and", "you ass"], lang=["de", "de", "en", "en"]))
    assert has == [1, 1, 0, 1] and match == ["mist", "oarsch", None, "ass"]


@pytest.mark.parametrize(
    ("lists", "said"),
    [
        ({"en": "missing.txt"}, "list '<dir>/missing.txt' not found"),
        ("missing-folder", "'<dir>/missing-folder' is not a folder"),
        ("empty-folder", "the folder '<dir>/empty-folder' has no <code>.txt files"),
        ("odd-folder", "'english' is not a language code"),
        ({"en": "latin1.txt"}, "list '<dir>/latin1.txt' is not UTF-8 text"),
        ({"english": "en.txt"}, "lists: 'english' is not a language code"),
    ],
)
def test_a_bad_list_is_one_config_error_naming_it(tmp_path, lists, said):
    (tmp_path / "empty-folder").mkdir()
    write_list(tmp_path / "odd-folder" / "english.txt", ["x"])
    (tmp_path / "latin1.txt").write_bytes("\xc4rger\n".encode("latin-1"))
    write_list(tmp_path / "en.txt", ["x"])
    write_list(tmp_path / "in.jsonl", ['{"text": "a text"}'])
    where = {k: str(tmp_path / v) for k, v in lists.items()} if isinstance(lists, dict) else str(tmp_path / lists)
    with pytest.raises(ConfigError) as error:  # parse_config opens what the run will load (check_files)
        source_config(
            tmp_path,
            [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "in.jsonl")]}],
            lang={"enabled": False},
            filter={"filters": ["c4_badwords"], "params": {"c4_badwords": {"lists": where}}},
        )
    message = str(error.value)
    assert "\n" not in message and message.startswith("filter.params.c4_badwords: ")
    assert said.replace("<dir>", str(tmp_path)) in message


def test_lists_in_a_table_expand_home_and_every_file_is_in_the_stage_identity(tmp_path, monkeypatch):
    from pipeline.stages.digests import named_files

    monkeypatch.setenv("HOME", str(tmp_path))
    write_list(tmp_path / "en.txt", ["x"])
    write_list(tmp_path / "lists" / "de.txt", ["y"])
    write_list(tmp_path / "in.jsonl", ['{"text": "a text"}'])
    config = source_config(
        tmp_path,
        [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "in.jsonl")]}],
        lang={"enabled": False},
        filter={
            "filters": ["c4_badwords"],
            "params": {"c4_badwords": {"lists": {"en": "~/en.txt"}}},
            "by_lang": {"de": {"params": {"c4_badwords": {"lists": "~/lists"}}}},
        },
    )
    assert config.filter.params["c4_badwords"]["lists"] == {"en": str(tmp_path / "en.txt")}
    assert named_files("filter", config) == {
        "filter.params.c4_badwords.lists.en": [tmp_path / "en.txt"],
        "filter.by_lang.de.params.c4_badwords.lists": [tmp_path / "lists" / "de.txt"],
    }


def test_a_bad_list_of_one_language_names_its_table(tmp_path):
    write_list(tmp_path / "en.txt", ["x"])
    write_list(tmp_path / "in.jsonl", ['{"text": "a text"}'])
    with pytest.raises(ConfigError, match=r"^filter\.by_lang\.de\.params\.c4_badwords: .*'.*/gone\.txt' not found"):
        source_config(
            tmp_path,
            [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "in.jsonl")]}],
            lang={"enabled": False},
            filter={
                "filters": ["c4_badwords"],
                "params": {"c4_badwords": {"lists": {"en": str(tmp_path / "en.txt")}}},
                "by_lang": {"de": {"params": {"c4_badwords": {"lists": {"de": str(tmp_path / "gone.txt")}}}}},
            },
        )


def test_notes_follow_each_languages_filters_and_are_stored_with_the_measures(lists):
    from pipeline.filters.engine import from_attributes, measure_groups, to_attributes
    from pipeline.filters.heuristics import C4Quality

    frame = docs(["you ass here", "so ein mist", "ภาษาไทย ass ครับ", "Bad Phrase"], lang=["en", "de", "th", "en"])
    # German's filters leave the list out; Thai's (the built-in profile) run it, with no Thai list
    settings = {"filters": ["c4_badwords"], "params": {"c4_badwords": {"lists": lists}}}
    kept, removed = filter_documents(frame, {**settings, "by_lang": {"de": {"filters": []}}})
    assert removed.select("id", "match").rows() == [("d0", "ass"), ("d3", "Bad Phrase")]
    assert sorted(kept["id"]) == ["d1", "d2"] and "match" not in kept.columns

    flt = C4BadWords(lists)
    groups = [(np.array([0, 3]), [flt]), (np.array([1]), [C4Quality()]), (np.array([2]), [flt])]
    measured = measure_groups(frame, groups)
    assert measured.notes["c4_badwords.match"].to_list() == ["ass", None, None, "Bad Phrase"]
    stored = to_attributes(frame, measured)
    assert stored["note:c4_badwords.match"].to_list() == ["ass", None, None, "Bad Phrase"]
    assert from_attributes(frame, stored).notes.equals(measured.notes)
