"""[filter.by_lang.<code>]: the documents of a language are measured and judged with that
language's filters and parameters, the others with the stage's, in one batch and in its order."""

from __future__ import annotations

import json
from collections import Counter

import polars as pl
import pytest

from pipeline.config import parse_config
from pipeline.filters.engine import apply_filters, decide, decide_groups, measure, measure_groups
from pipeline.filters.heuristics import GopherRepetition
from pipeline.filters.registry import build_filters
from pipeline.formats.configfile import ConfigError
from pipeline.stages.rerun import plan_run
from pipeline.stages.steps import FilterChain, filter_settings_step
from tests.helpers import curate_in_process, stage_outputs, write_jsonl

THAI = "วันนี้อากาศดีมาก เราไปเดินเล่นที่สวนสาธารณะ มีคนมากมายวิ่งออกกำลังกายอยู่ที่นั่น"  # no sentence mark
ENGLISH = " ".join(["The weather is fine today, and we walked in the park for an hour with the dog."] * 4)


def batch(texts_langs: list[tuple[str, str | None]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "id": [f"d{i}" for i in range(len(texts_langs))],
            "text": [t for t, _ in texts_langs],
            "source": ["web"] * len(texts_langs),
            "lang": [lang for _, lang in texts_langs],
        },
        schema_overrides={"lang": pl.String},
    )


def settings(by_lang: dict, params: dict | None = None):
    sources = [{"name": "web", "reader": "jsonl", "paths": ["README.md"]}]
    filters = {"filters": ["c4_quality", "gopher_quality"], "params": params or {}, "by_lang": by_lang}
    return parse_config({"run_dir": "runs/x", "sources": sources, "filter": filters}).filter


def test_a_languages_own_rules_judge_its_documents_and_the_others_keep_the_stages():
    docs = batch([(ENGLISH, "en"), (THAI, "th"), (THAI, "tha_Thai"), ("Too short.", "en"), (THAI, None)])
    thai = {"th": {"params": {"c4_quality": {"min_sentences": 0, "filter_no_terminal_punct": False}}}}
    result = filter_settings_step(settings(thai))(docs)
    assert result.kept["id"].to_list() == ["d0", "d1", "d2"]  # in the batch's order
    removed = dict(zip(result.removed["id"], result.removed["rule"]))
    assert removed == {"d3": "c4_quality.min_sentences", "d4": "c4_quality.min_sentences"}  # no lang: the stage's
    assert result.kept["text"].to_list()[1] == THAI  # the Thai line is no longer dropped for its end
    # Each group is exactly what its own filters make of it alone.
    alone = apply_filters(docs[[1, 2]], build_filters(*settings(thai).for_lang("th")))
    assert result.kept.filter(pl.col("lang") != "en").equals(alone.kept)
    assert result.counts["fired|c4_quality.min_sentences"] == 2


def test_a_language_may_run_other_filters():
    docs = batch([(ENGLISH, "en"), (THAI, "th")])
    step = filter_settings_step(settings({"th": {"filters": ["gopher_quality"]}}))
    result = step(docs)
    assert result.kept["id"].to_list() == ["d0", "d1"]
    assert "fired|c4_quality.min_sentences" in result.counts


@pytest.mark.parametrize(
    ("by_lang", "message"),
    [
        ({"th": {"params": {"c4_quality": {"min_sentence": 1}}}}, "filter.by_lang.th.params.c4_quality.min_sentence"),
        ({"th": {"filters": ["c4"]}}, "by_lang.th: unknown filter 'c4'"),
        ({"zh": {}, "zho_Hans": {}}, "'zh' and 'zho_Hans' name one language"),
        ({"??": {}}, "by_lang: '??' is not a language code"),
    ],
)
def test_a_wrong_by_lang_table_is_one_line_naming_it(by_lang, message):
    with pytest.raises(ConfigError, match=message.replace("?", r"\?").replace(".", r"\.")):
        settings(by_lang)


def test_a_languages_threshold_changed_decides_again_to_the_bytes_of_a_fresh_run(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": t} for t in [ENGLISH * 3, THAI * 3, ENGLISH, THAI] * 20])

    def config(run: str, min_sentences):
        thai = {"th": {"params": {"c4_quality": {"min_sentences": min_sentences}}}}
        return parse_config(
            {
                "run_dir": str(tmp_path / run),
                "sources": [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "in")]}],
                "filter": {"by_lang": thai},
                "dedup": {"enabled": False},
                "tokenize": {"enabled": False},
            }
        )

    first = curate_in_process(config("run", 3))
    assert first["filter"]["languages"]["th"]["docs_out"] == 0  # C4 removes every Thai line (no marks)
    changed = config("run", 0)
    assert [str(p) for p in plan_run(changed).stages][2].startswith("filter: re-decides from its stored measurements")
    again = curate_in_process(changed)
    fresh = curate_in_process(config("fresh", 0))
    assert again == json.loads(json.dumps(fresh).replace("/fresh/", "/run/"))
    assert stage_outputs(tmp_path / "run") == stage_outputs(tmp_path / "fresh")


def test_langs_and_exclude_langs_scope_the_filters_and_the_others_pass_through():
    from pipeline.filters.scope import Scope

    docs = batch([(THAI, "th"), ("Too short.", "en"), ("Too short.", "eng_Latn"), ("Too short.", None)])
    only_english = parse_config(
        {
            "run_dir": "runs/x",
            "sources": [{"name": "web", "reader": "jsonl", "paths": ["README.md"]}],
            "filter": {"langs": ["en"]},
        }
    ).filter
    result = filter_settings_step(only_english)(docs)
    assert sorted(result.removed["id"]) == ["d1", "d2"]  # eng_Latn is English; no language: out of scope
    assert result.kept["text"].to_list() == [THAI, "Too short."]  # unchanged
    no_thai = Scope("filter", exclude_langs=("tha",))
    assert no_thai.mask(docs).to_list() == [False, True, True, True]
    assert no_thai.outside("web", "th") == "its language (th) is in filter.exclude_langs"
    assert Scope("lines", ("news",), ("zh",)).outside("web", "zh") == "its source is not in lines.sources"
    assert Scope("lines", None, ("zh",)).outside("web", None) == "its language (none) is not in lines.langs"
    assert Scope("lines", ("web",), ("zh", "ja")).describe() == "sources web; languages zh, ja"


def test_the_lines_stage_leaves_a_language_it_excludes_alone(tmp_path):
    footer = "Share this page with your friends and family today"
    english = [f"Article {i} is about gardens and the weather in spring.\n{footer}" for i in range(30)]
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": t} for t in english])
    config = parse_config(
        {
            "run_dir": str(tmp_path / "run"),
            "sources": [{"name": "web", "reader": "jsonl", "paths": [str(tmp_path / "in")]}],
            "lang": {"enabled": False},
            "filter": {"enabled": False},
            "dedup": {"enabled": False},
            "tokenize": {"enabled": False},
            "lines": {"max_docs": 5},
        }
    )
    cut = curate_in_process(config)
    assert cut["lines"]["counts"]
    kept = pl.read_parquet(tmp_path / "run" / "lines" / "docs")["text"].to_list()
    assert not any(footer in t for t in kept)
    left_alone = config.model_copy(
        update={"run_dir": tmp_path / "alone", "lines": config.lines.model_copy(update={"langs": ["en"]})}
    )
    curate_in_process(left_alone)  # the lang stage is off: no document has a language in lines.langs
    kept = pl.read_parquet(tmp_path / "alone" / "lines" / "docs")["text"].to_list()
    assert all(footer in t for t in kept)


def test_the_built_in_profiles_keep_thai_and_armenian_prose_and_can_be_turned_off():
    armenian = "\n".join(
        [
            "Արքաների հովիտը քարքարոտ հովիտ է Եգիպտոսում, որտեղ կառուցվել են դամբարաններ:",
            "Հովիտը հայտնի է իր գեղեցիկ ու հին դամբարաններով և շատ այցելուներ ունի:",
            "Այստեղ աշխատում են շատ հնագետներ, ովքեր ուսումնասիրում են պատմությունը:",
        ]
        * 2
    )
    thai = "\n".join([THAI] * 3)
    docs = batch([(thai, "th"), (thai, "lo"), (armenian, "hy"), (ENGLISH, "en")]).with_columns(
        pl.Series("text", [thai, thai.replace("วันนี้", "ມື້ນີ້"), armenian, ENGLISH])
    )
    default = filter_settings_step(settings({}))(docs)
    assert default.kept["id"].to_list() == ["d0", "d1", "d2", "d3"]
    assert default.kept["text"].to_list()[2] == armenian  # no line dropped for its ':'
    off = parse_config(
        {
            "run_dir": "runs/x",
            "sources": [{"name": "web", "reader": "jsonl", "paths": ["README.md"]}],
            "filter": {"filters": ["c4_quality", "gopher_quality"], "language_profiles": False},
        }
    ).filter
    assert filter_settings_step(off)(docs).kept["id"].to_list() == ["d3"]
    # A by_lang table of a language with a profile overrides it, parameter by parameter.
    names, params = settings({"th": {"params": {"c4_quality": {"min_sentences": 2}}}}).for_lang("th")
    assert params["c4_quality"] == {"min_sentences": 2, "filter_no_terminal_punct": False}


# A varied batch: the languages with built-in profiles (th, lo, hy, ko), spaceless scripts whose
# n-grams are scaled (zh, ja), English with PII, navigation and repetition, codes of other
# forms, none, and an empty text; each text twice, once under its own code and once under
# another's, so every group holds documents of every kind.
PROSE = {
    "en": "The river rose slowly through the night and reached the old stone bridge by morning.\n"
    "Farmers moved their cattle to the higher fields before the water covered the lower roads.\n"
    "By noon the school had opened its hall to the families whose houses stood near the bank.\n"
    "Volunteers carried bread, blankets and dry clothes from the market square in small boats.\n"
    "When the rain stopped on the third day, the town began to count what it had lost.",
    "fr": "La rivière est montée lentement pendant la nuit et a atteint le vieux pont de pierre.\n"
    "Les paysans ont conduit leurs vaches vers les champs plus hauts avant que l'eau arrive.\n"
    "À midi, l'école a ouvert sa grande salle aux familles dont les maisons bordaient la rive.\n"
    "Des bénévoles ont apporté du pain, des couvertures et des vêtements secs en barque.\n"
    "Quand la pluie a cessé le troisième jour, la ville a commencé à compter ses pertes.",
    "ko": "강물이 밤새 천천히 불어나서 아침에는 오래된 돌다리까지 차올랐습니다.\n"
    "농부들은 물이 낮은 길을 덮기 전에 소들을 높은 들판으로 옮겼습니다.\n"
    "정오가 되자 학교는 강가에 집이 있는 가족들에게 강당을 열어 주었습니다.\n"
    "자원봉사자들은 작은 배에 빵과 담요와 마른 옷을 싣고 시장에서 왔습니다.\n"
    "사흘째 되는 날 비가 그치자 마을 사람들은 잃어버린 것들을 세기 시작했습니다.\n"
    "아이들은 젖은 책을 햇볕에 말리면서 다시 학교에 갈 날을 기다렸습니다.",
    "zh": "河水在夜里慢慢上涨，到早上已经漫到了那座古老的石桥。\n"
    "农民们在洪水淹没低处的道路之前，把牛赶到了更高的田地里。\n"
    "中午的时候，学校向住在河边的家庭打开了礼堂的大门。\n"
    "志愿者们用小船从集市运来了面包、毯子和干净的衣服。\n"
    "第三天雨停了以后，镇上的人们开始清点自己失去的东西。",
    "ja": "川の水は夜のあいだにゆっくりと増え、朝には古い石の橋まで届いた。\n"
    "農家の人たちは、水が低い道を覆う前に牛を高い畑へ移した。\n"
    "昼になると、学校は川の近くに住む家族のために講堂を開いた。\n"
    "ボランティアは小さな舟でパンや毛布や乾いた服を市場から運んだ。\n"
    "三日目に雨がやむと、町の人々は失ったものを数え始めた。",
    "hy": "Գետը գիշերը դանդաղ բարձրացավ և առավոտյան հասավ հին քարե կամրջին:\n"
    "Գյուղացիները կովերին տարան բարձր դաշտերը, մինչ ջուրը կծածկեր ճանապարհները:\n"
    "Կեսօրին դպրոցը բացեց իր դահլիճը գետափին ապրող ընտանիքների համար:\n"
    "Կամավորները նավակներով բերեցին հաց, ծածկոցներ և չոր հագուստ շուկայից:\n"
    "Երրորդ օրը, երբ անձրևը դադարեց, քաղաքը սկսեց հաշվել իր կորուստները:\n"
    "Երեխաները արևի տակ չորացնում էին իրենց թաց գրքերը և սպասում դպրոց վերադառնալու օրվան:",
    "th": "แม่น้ำค่อยๆ สูงขึ้นตลอดทั้งคืนและไหลไปถึงสะพานหินเก่าในตอนเช้า\n"
    "ชาวนาย้ายวัวของพวกเขาไปยังทุ่งที่สูงกว่าก่อนที่น้ำจะท่วมถนนเส้นล่าง\n"
    "ตอนเที่ยงโรงเรียนเปิดห้องโถงให้ครอบครัวที่บ้านอยู่ใกล้ริมฝั่งแม่น้ำ\n"
    "อาสาสมัครนำขนมปัง ผ้าห่ม และเสื้อผ้าแห้งมาจากตลาดด้วยเรือลำเล็ก\n"
    "เมื่อฝนหยุดตกในวันที่สาม ผู้คนในเมืองก็เริ่มนับสิ่งที่พวกเขาสูญเสียไป",
}
PAGE = (
    "Home | News | Sport | Contact\n"
    + PROSE["en"]
    + "\nWrite to jane.doe@example.com or call 555-123-4567 about the meeting of the garden club.\n"
    + "Read more...\n"
)
TEXTS = [*PROSE.values(), PAGE, "\n".join([ENGLISH] * 3), "Too short.", ""]
CODES = ["en", "th", "lo", "hy", "ko", "kor_Hang", "zh", "ja", "tha_Thai", None, "fr"]


def varied_batch() -> pl.DataFrame:
    own = [*PROSE, "en", "en", "en", "en"]  # each text under its own language's code ...
    other = [CODES[(i + 3) % len(CODES)] for i in range(len(TEXTS))]  # ... and under another
    return batch([pair for i, text in enumerate(TEXTS) for pair in ((text, own[i]), (text, other[i]))])


FIVE = ["c4_quality", "gopher_quality", "gopher_repetition", "fineweb_quality", "pii"]


@pytest.mark.parametrize(
    "by_lang",
    [
        {},  # the built-in profiles alone
        {"en": {"params": {"gopher_repetition": {"dup_line_frac": 0.5}}}},  # thresholds only
        {"fr": {"params": {"c4_quality": {"min_words_per_line": 2}}}},  # a measuring parameter
        {"zh": {"filters": ["gopher_quality", "pii"]}},  # other filters
    ],
)
def test_each_language_gets_what_its_own_filters_make_of_it_alone(by_lang):
    """The step measures the batch once and re-measures a language only where its filters differ:
    every document's verdict, text, measures and counts are those of its group measured alone."""
    filt = parse_config(
        {
            "run_dir": "runs/x",
            "sources": [{"name": "web", "reader": "jsonl", "paths": ["README.md"]}],
            "filter": {"filters": FIVE, "by_lang": by_lang},
        }
    ).filter
    docs = varied_batch()
    step = FilterChain(build_filters(filt.filters, filt.params), "filter", None, build_by_lang(filt))
    groups = step.groups(docs)
    assert len(groups) >= 4
    measured = measure_groups(docs, groups)
    result = decide_groups(docs, measured, groups)

    kept, removed, counts, values = [], [], Counter(), []
    for rows, filters in groups:
        part = docs[pl.Series(rows, dtype=pl.Int64)]
        alone = measure(part, filters)
        decided = decide(part, alone, filters)
        gone = part["id"].is_in(decided.removed["id"].implode())
        kept.append(decided.kept.with_columns(row=pl.Series(rows).filter(~gone)))
        removed.append(decided.removed.with_columns(row=pl.Series(rows).filter(gone)))
        counts.update(decided.counts)
        values.append(alone.values.with_columns(row=pl.Series(rows)))
    in_order = lambda frames: pl.concat(frames, how="diagonal_relaxed").sort("row").drop("row")  # noqa: E731
    assert result.kept.equals(in_order(kept).select(result.kept.columns))
    assert result.removed.equals(in_order(removed))
    assert +result.counts == +counts
    assert measured.values.equals(in_order(values).select(measured.values.columns))
    assert result.removed.height and result.kept.height


def build_by_lang(filt) -> dict:
    return {code: build_filters(*filt.for_lang(code)) for code in filt.languages()}


def test_a_language_whose_rules_differ_in_thresholds_only_is_not_measured_again(monkeypatch):
    """Korean's built-in profile changes a threshold (Gopher's mean word length) and nothing
    else: its documents take their measures from the batch's one measurement."""
    measured_rows = []
    original = GopherRepetition.apply

    def counting(self, docs):
        measured_rows.append(docs.height)
        return original(self, docs)

    monkeypatch.setattr(GopherRepetition, "apply", counting)
    docs = batch([(PROSE["ko"], "ko"), (PROSE["en"], "en"), (PROSE["ko"], "kor_Hang"), (PROSE["en"], None)])
    filt = parse_config(
        {
            "run_dir": "runs/x",
            "sources": [{"name": "web", "reader": "jsonl", "paths": ["README.md"]}],
            "filter": {"filters": FIVE},
        }
    ).filter
    result = filter_settings_step(filt)(docs)
    assert measured_rows == [4]  # one measurement of the whole batch, no group measured apart
    korean = apply_filters(docs[[0, 2]], build_filters(*filt.for_lang("ko")))
    assert (
        korean.removed.select("id", "rule", "value").rows()
        == result.removed.filter(pl.col("id").is_in(["d0", "d2"])).select("id", "rule", "value").rows()
    )
    assert filt.for_lang("ko")[1] == {"gopher_quality": {"min_mean_word_length": 2}}


def test_the_varied_batch_is_judged_as_before_the_filters_were_compiled():
    """The verdicts the default filters and profiles gave this batch before the word split,
    n-grams and repeated lines ran compiled and before a batch was measured once for every
    language (each rule and value, each kept text's length)."""
    filt = parse_config(
        {
            "run_dir": "runs/x",
            "sources": [{"name": "web", "reader": "jsonl", "paths": ["README.md"]}],
            "filter": {"filters": FIVE},
        }
    ).filter
    result = filter_settings_step(filt)(varied_batch())
    removed = {i: (rule, round(value, 6)) for i, rule, value in result.removed.select("id", "rule", "value").rows()}
    assert removed == {
        "d6": ("fineweb_quality.short_line_ratio", 1.0),
        "d7": ("fineweb_quality.short_line_ratio", 1.0),
        "d11": ("gopher_repetition.top_3gram_char_frac", 0.203343),
        "d13": ("c4_quality.min_sentences", 0.0),
        "d16": ("gopher_repetition.dup_line_frac", 0.666667),
        "d17": ("gopher_repetition.dup_line_frac", 0.666667),
        "d18": ("c4_quality.min_sentences", 0.0),
        "d19": ("gopher_quality.word_count_min", 2.0),
        "d20": ("c4_quality.min_sentences", 0.0),
        "d21": ("gopher_quality.word_count_min", 0.0),
    }
    kept = dict(zip(result.kept["id"], result.kept["text"].str.len_chars()))
    assert kept == {
        "d0": 435,
        "d1": 435,
        "d2": 431,
        "d3": 431,
        "d4": 243,
        "d5": 243,
        "d8": 151,
        "d9": 151,
        "d10": 428,
        "d12": 332,
        "d14": 511,
        "d15": 511,
    }
