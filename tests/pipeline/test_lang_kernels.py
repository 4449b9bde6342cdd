"""The compiled fastText prediction (pipeline.lang.kernels) gives fastText's own labels and scores,
bit for bit, and the identifier falls back to fastText for the models it does not reproduce."""

from __future__ import annotations

import copy
from pathlib import Path

import fasttext
import numpy as np
import pytest

from pipeline.filters.quality import zeroed_allocations
from pipeline.lang import LanguageIdentifier, kernels
from pipeline.lang.model import fetch_lid_model

ROOT = Path(__file__).resolve().parents[2]
SENTENCES = [
    "The library near our house opens early on Saturdays, so I often go there to read the newspaper.",
    "Am Wochenende fahren wir mit den Kindern an den See, wenn das Wetter schön bleibt.",
    "Mi hermana trabaja en un hospital del centro de la ciudad y vuelve muy tarde a casa.",
    "Вчера вечером мы долго гуляли по набережной и разговаривали о планах на лето.",
    "今天早上我和朋友一起去公园散步，天气非常好，我们还在湖边喝了一杯咖啡。",
]


def fasttext_predictions(identifier: LanguageIdentifier, texts: list[str]) -> tuple[list[str], bytes]:
    fallback = copy.copy(identifier)
    fallback._compiled = None
    langs, scores = fallback.predict(texts)
    return langs, scores.tobytes()


def compiled_predictions(identifier: LanguageIdentifier, texts: list[str]) -> tuple[list[str], bytes]:
    assert identifier._compiled is not None
    langs, scores = identifier.predict(texts)
    return langs, scores.tobytes()


def odd_texts(seed: int, n: int) -> list[str]:
    """Texts that stress the tokenizer: every separator fastText knows, a word that is the
    end-of-sentence token, label-like words, words of 1 to 40 characters in several scripts
    (multi-byte UTF-8, astral characters), runs of punctuation."""
    rng = np.random.default_rng(seed)
    alphabets = [
        "abcdefghijklmnopqrstuvwxyzéèàüöß",
        "абвгдежзийклмнопрстуфхцчшщыэюя",
        "的一是不了人我在有他这中大来上国个到说们",
        "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
        "😀🙂🎉𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
        "0123456789#*.,;:!?-_()[]{}",
    ]
    specials = ["</s>", "__label__en", "__label__", "the", "de", "la", "\t", "\r", "\x0b", "\x0c", "\x00", "  "]
    texts = []
    for _ in range(n):
        words = []
        for _ in range(int(rng.integers(0, 60))):
            if rng.random() < 0.15:
                words.append(specials[int(rng.integers(len(specials)))])
            else:
                alphabet = alphabets[int(rng.integers(len(alphabets)))]
                words.append("".join(rng.choice(list(alphabet), size=int(rng.integers(1, 41)))))
        texts.append(" ".join(words))
    return texts


@pytest.fixture(scope="module")
def lid176() -> LanguageIdentifier:
    return LanguageIdentifier(fetch_lid_model(ROOT / ".cache" / "models"))


@pytest.mark.parametrize("sample", [(1000, 4), (301, 3), (7, 7)])
def test_lid176_is_predicted_as_fasttext_does(lid176, sample):
    lid176 = copy.copy(lid176)
    lid176.sample_chars, lid176.sample_spans = sample
    texts = [*SENTENCES, *odd_texts(0, 400), "x", "</s> hidden after the end", "a" * 3000, None, ""]
    # white space only (Unicode's, which the identifier calls undetermined), and what is not
    texts += [" \t\n ", "\u00a0\u3000\u2028\u205f", "\u200b", "\u00a0x\u00a0", "\n".join(["word"] * 400)]
    # long texts read as spans, one across a newline and multi-byte characters at the spans' edges
    texts += ["é" * 997 + "\n" + "ж" * 1500, ("日本語 " * 300) + "end", " ".join(odd_texts(2, 30))]
    langs, scores = compiled_predictions(lid176, texts)
    expected_langs, expected_scores = fasttext_predictions(lid176, texts)
    assert langs == expected_langs
    assert scores == expected_scores
    assert len(set(langs)) > 5  # the texts reach many labels, not one


@pytest.mark.parametrize("qnorm", [False, True])
def test_other_quantized_models_are_predicted_as_fasttext_does(tmp_path, qnorm):
    train = tmp_path / "train.txt"
    labels = ["en", "de", "es", "ru", "zh"]
    rows = [f"__label__{label} {text}" for label, text in zip(labels, SENTENCES)] * 40
    train.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with zeroed_allocations():  # this fastText build starts from unset memory otherwise
        model = fasttext.train_supervised(
            str(train), dim=8, epoch=5, minn=1, maxn=3, loss="hs", thread=1, verbose=0, seed=0
        )
    model.quantize(qnorm=qnorm, cutoff=300, retrain=False, dsub=3)  # 8 = 3 + 3 + 2: a shorter last sub-vector
    path = tmp_path / "tiny.ftz"
    model.save_model(str(path))
    identifier = LanguageIdentifier(path)
    texts = [*SENTENCES, *odd_texts(1, 200)]
    assert compiled_predictions(identifier, texts) == fasttext_predictions(identifier, texts)


def test_models_it_cannot_reproduce_use_fasttext(tmp_path):
    train = tmp_path / "train.txt"
    train.write_text("".join(f"__label__{i} {text}\n" for i, text in enumerate(SENTENCES)) * 20, encoding="utf-8")
    with zeroed_allocations():  # this fastText build starts from unset memory otherwise
        dense = fasttext.train_supervised(str(train), dim=8, epoch=5, minn=2, maxn=4, thread=1, verbose=0, seed=0)
    dense.save_model(str(tmp_path / "dense.bin"))
    assert kernels.read_model(tmp_path / "dense.bin") is None  # softmax loss, dense input
    identifier = LanguageIdentifier(tmp_path / "dense.bin")
    assert identifier._compiled is None
    assert identifier.predict(SENTENCES)[0] == [str(i) for i in range(len(SENTENCES))]


def test_a_check_that_differs_falls_back(lid176, monkeypatch):
    # The compiled predictor is checked against fastText when a model loads; a difference (another
    # platform's libm, say) means fastText predicts.
    expected = compiled_predictions(lid176, SENTENCES)
    real = kernels.Predictor.predict

    def off_by_one_ulp(self, *args):
        labels, scores = real(self, *args)
        return labels, np.nextafter(scores, np.float32(2))

    monkeypatch.setattr(kernels.Predictor, "predict", off_by_one_ulp)
    identifier = LanguageIdentifier(lid176.model_path)
    assert identifier._compiled is None
    assert fasttext_predictions(identifier, SENTENCES) == expected
