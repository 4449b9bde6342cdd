"""Language codes: how every language setting of a config, and the documents' ``lang`` column,
name a language, read in one place.

A code is read as a language and a script (:func:`parse_lang`): ISO 639-1 (``en``), ISO 639-3 or
639-2 (``eng``, ``yue``, ``cmn``), BCP 47 (``zh-Hant-TW``) and the labels of GlotLID and OpenLID
(``eng_Latn``, ``zho_Hans``). Codes of one language are one language (``zh``, ``zho_Hans`` and
``cmn_Hani`` are Chinese); the script is not used to tell documents apart.

A config's codes (``lang.keep``, ``lang.min_score_by_lang``, ``filter.langs``, ``filter.exclude_langs``,
``filter.by_lang``, ``lines.langs``, ``lines.exclude_langs``; ``curate calibrate --english``) are
checked twice. As the config is read (:func:`code_languages`): each is a code (no whitespace or
control characters), and no two of one setting name one language. Once the language-ID model is
known (:func:`check_model_codes`): each names a language the model gives (the language of one of
its labels, or :data:`UNDETERMINED`), else the one-line error names the nearest code the model gives
(:func:`nearest_code`), in the model's own spelling (``en`` for lid.176, ``eng_Latn`` for GlotLID).
"""

from __future__ import annotations

import difflib
import functools
import os
import re
from collections.abc import Iterable

import polars as pl

# What the lang stage gives a document with no text (BCP 47 / ISO 639-2: undetermined).
UNDETERMINED = "und"

# The labels of fastText's lid.176 (the default model), as the lang stage writes them.
LID176_LABELS = tuple(
    """
af als am an ar arz as ast av az azb ba bar bcl be bg bh bn bo bpy br bs bxr ca cbk ce ceb ckb co cs
cv cy da de diq dsb dty dv el eml en eo es et eu fa fi fr frr fy ga gd gl gn gom gu gv he hi hif hr
hsb ht hu hy ia id ie ilo io is it ja jbo jv ka kk km kn ko krc ku kv kw ky la lb lez li lmo lo lrc
lt lv mai mg mhr min mk ml mn mr mrj ms mt mwl my myv mzn nah nap nds ne new nl nn no oc or os pa pam
pfl pl pms pnb ps pt qu rm ro ru rue sa sah sc scn sco sd sh si sk sl so sq sr su sv sw ta te tg th
tk tl tr tt tyv ug uk ur uz vec vep vi vls vo wa war wuu xal xmf yi yo yue zh""".split()
)

# Languages by name (English, and the own name where it differs in ASCII), so that a name given as
# a code (``english``, ``deutsch``) is answered with its code.
LANGUAGE_NAMES: dict[str, str] = dict(
    pair.split(":")
    for pair in """
english:en german:de deutsch:de french:fr francais:fr spanish:es espanol:es castellano:es italian:it
italiano:it portuguese:pt portugues:pt dutch:nl nederlands:nl flemish:nl russian:ru chinese:zh
mandarin:zh japanese:ja korean:ko arabic:ar hindi:hi bengali:bn bangla:bn urdu:ur persian:fa farsi:fa
turkish:tr polish:pl polski:pl ukrainian:uk czech:cs slovak:sk slovenian:sl slovene:sl croatian:hr
serbian:sr bosnian:bs bulgarian:bg romanian:ro hungarian:hu magyar:hu greek:el swedish:sv svenska:sv
norwegian:no norsk:no bokmal:no nynorsk:nn danish:da dansk:da finnish:fi suomi:fi estonian:et
latvian:lv lithuanian:lt icelandic:is
irish:ga welsh:cy scottish:gd gaelic:gd breton:br basque:eu catalan:ca galician:gl hebrew:he
yiddish:yi thai:th lao:lo khmer:km burmese:my vietnamese:vi indonesian:id malay:ms tagalog:tl
filipino:tl swahili:sw somali:so amharic:am tamil:ta telugu:te kannada:kn malayalam:ml marathi:mr
gujarati:gu punjabi:pa nepali:ne sinhala:si sinhalese:si tibetan:bo mongolian:mn kazakh:kk uzbek:uz
kyrgyz:ky tajik:tg turkmen:tk azerbaijani:az azeri:az georgian:ka armenian:hy albanian:sq
macedonian:mk belarusian:be latin:la esperanto:eo afrikaans:af frisian:fy luxembourgish:lb
maltese:mt corsican:co occitan:oc javanese:jv sundanese:su malagasy:mg yoruba:yo quechua:qu
haitian:ht creole:ht pashto:ps sindhi:sd kurdish:ku uyghur:ug tatar:tt bashkir:ba chechen:ce
cantonese:yue wu:wuu cebuano:ceb waray:war asturian:ast interlingua:ia volapuk:vo walloon:wa
undetermined:und""".split()
)

# The script a language is written in when its code names none (CLDR's likely script). Languages
# not listed have no default: their documents are judged by their characters.
DEFAULT_SCRIPTS: dict[str, str] = {
    **dict.fromkeys(("zh", "yue", "wuu", "gan", "hak", "hsn", "cjy", "cdo", "lzh"), "Hani"),
    "ja": "Jpan",
    "th": "Thai",
    "lo": "Laoo",
    "km": "Khmr",
    "my": "Mymr",
    "shn": "Mymr",
    "mnw": "Mymr",
    "bo": "Tibt",
    "dz": "Tibt",
    "ko": "Kore",
    "el": "Grek",
    "he": "Hebr",
    "yi": "Hebr",
    "hy": "Armn",
    "ka": "Geor",
    "xmf": "Geor",
    "am": "Ethi",
    "ti": "Ethi",
    "dv": "Thaa",
    "bn": "Beng",
    "as": "Beng",
    "bpy": "Beng",
    "pa": "Guru",
    "gu": "Gujr",
    "or": "Orya",
    "ta": "Taml",
    "te": "Telu",
    "kn": "Knda",
    "ml": "Mlym",
    "si": "Sinh",
    **dict.fromkeys(("hi", "mr", "ne", "sa", "mai", "new", "gom", "bh", "dty"), "Deva"),
    **dict.fromkeys(("ar", "fa", "ur", "ps", "sd", "ug", "ckb", "arz", "azb", "pnb", "mzn", "lrc"), "Arab"),
    **dict.fromkeys(
        (
            "ru",
            "uk",
            "be",
            "bg",
            "mk",
            "kk",
            "ky",
            "tg",
            "mn",
            "tt",
            "ba",
            "cv",
            "ce",
            "os",
            "av",
            "sah",
            "kv",
            "udm",
            "myv",
            "mhr",
            "mrj",
            "krc",
            "lez",
            "xal",
            "tyv",
            "bxr",
        ),
        "Cyrl",
    ),
    **dict.fromkeys(
        (
            "en",
            "de",
            "fr",
            "es",
            "it",
            "pt",
            "nl",
            "sv",
            "da",
            "no",
            "nb",
            "nn",
            "fi",
            "et",
            "lv",
            "lt",
            "pl",
            "cs",
            "sk",
            "sl",
            "hr",
            "bs",
            "hu",
            "ro",
            "tr",
            "az",
            "uz",
            "tk",
            "id",
            "ms",
            "vi",
            "tl",
            "sw",
            "so",
            "ha",
            "yo",
            "ig",
            "zu",
            "xh",
            "af",
            "eu",
            "ca",
            "gl",
            "oc",
            "br",
            "cy",
            "ga",
            "gd",
            "is",
            "fo",
            "mt",
            "sq",
            "la",
            "eo",
            "lb",
            "fy",
            "jv",
            "su",
            "ceb",
            "war",
            "mg",
            "qu",
            "ht",
        ),
        "Latn",
    ),
}
# ISO 639-1 code -> ISO 639-3 (639-2/T) code.
ISO639_1_TO_3: dict[str, str] = dict(
    pair.split(":")
    for pair in """
aa:aar ab:abk ae:ave af:afr ak:aka am:amh an:arg ar:ara as:asm av:ava ay:aym az:aze ba:bak be:bel
bg:bul bi:bis bm:bam bn:ben bo:bod br:bre bs:bos ca:cat ce:che ch:cha co:cos cr:cre cs:ces cu:chu
cv:chv cy:cym da:dan de:deu dv:div dz:dzo ee:ewe el:ell en:eng eo:epo es:spa et:est eu:eus fa:fas
ff:ful fi:fin fj:fij fo:fao fr:fra fy:fry ga:gle gd:gla gl:glg gn:grn gu:guj gv:glv ha:hau he:heb
hi:hin ho:hmo hr:hrv ht:hat hu:hun hy:hye hz:her ia:ina id:ind ie:ile ig:ibo ii:iii ik:ipk io:ido
is:isl it:ita iu:iku ja:jpn jv:jav ka:kat kg:kon ki:kik kj:kua kk:kaz kl:kal km:khm kn:kan ko:kor
kr:kau ks:kas ku:kur kv:kom kw:cor ky:kir la:lat lb:ltz lg:lug li:lim ln:lin lo:lao lt:lit lu:lub
lv:lav mg:mlg mh:mah mi:mri mk:mkd ml:mal mn:mon mr:mar ms:msa mt:mlt my:mya na:nau nb:nob nd:nde
ne:nep ng:ndo nl:nld nn:nno no:nor nr:nbl nv:nav ny:nya oc:oci oj:oji om:orm or:ori os:oss pa:pan
pi:pli pl:pol ps:pus pt:por qu:que rm:roh rn:run ro:ron ru:rus rw:kin sa:san sc:srd sd:snd se:sme
sg:sag si:sin sk:slk sl:slv sm:smo sn:sna so:som sq:sqi sr:srp ss:ssw st:sot su:sun sv:swe sw:swa
ta:tam te:tel tg:tgk th:tha ti:tir tk:tuk tl:tgl tn:tsn to:ton tr:tur ts:tso tt:tat tw:twi ty:tah
ug:uig uk:ukr ur:urd uz:uzb ve:ven vi:vie vo:vol wa:wln wo:wol xh:xho yi:yid yo:yor za:zha zh:zho
zu:zul""".split()
)
# Other three-letter codes of a two-letter language: ISO 639-2/B codes, and the individual
# languages that language-ID models (GlotLID, OpenLID) label for a macrolanguage (Mandarin for
# Chinese, Standard Arabic, Iranian Persian, Norwegian Bokmal, ...). Cantonese (yue), Wu (wuu),
# Norwegian Nynorsk (nno: lid.176's nn) and South Azerbaijani (azb) stay themselves; so do
# lid.176's Wikipedia codes (als: Alemannic there, sh: Serbo-Croatian, bh: Bihari).
THREE_LETTER_ALIASES: dict[str, str] = dict(
    pair.split(":")
    for pair in """
alb:sq arm:hy baq:eu bur:my chi:zh cze:cs dut:nl fre:fr geo:ka ger:de gre:el ice:is mac:mk mao:mi
may:ms per:fa rum:ro slo:sk tib:bo wel:cy cmn:zh arb:ar pes:fa prs:fa zsm:ms zlm:ms ekk:et lvs:lv
swh:sw plt:mg uzn:uz azj:az khk:mn npi:ne ory:or pbt:ps gaz:om quy:qu ydd:yi kmr:ku ayr:ay gug:gn
fil:tl nob:no kpv:kv
""".split()
)
# Two-letter codes of a language lid.176 names by another: Norwegian Bokmal (lid.176's "no" is
# Norwegian Wikipedia, written in Bokmal), and the withdrawn ISO 639-1 codes of Hebrew, Indonesian,
# Yiddish, Javanese and Moldavian.
TWO_LETTER_ALIASES: dict[str, str] = {"nb": "no", "iw": "he", "in": "id", "ji": "yi", "jw": "jv", "mo": "ro"}
_TO_TWO_LETTERS = {three: two for two, three in ISO639_1_TO_3.items()} | THREE_LETTER_ALIASES | TWO_LETTER_ALIASES
_LANG_CODE = re.compile(r"^([A-Za-z]{2,3})(?:[-_]([A-Za-z0-9]+))*$")


@functools.lru_cache(maxsize=4096)
def parse_lang(code: str | None) -> tuple[str | None, str | None]:
    """A language code as ``(language, script)``.

    Reads ISO 639-1 (``"en"``), ISO 639-3 or 639-2 (``"eng"``, ``"yue"``, ``"cmn"``), BCP 47
    (``"zh-Hant-TW"``, ``"sr_Latn"``) and GlotLID/OpenLID labels (``"eng_Latn"``,
    ``"zho_Hans"``). The language is lowercase and two letters where ISO 639-1 has a code for it
    (``"eng"`` and ``"eng_Latn"`` give ``"en"``, ``"cmn_Hani"`` gives ``"zh"``), else the code as
    written; the script is the ISO 15924 subtag in title case, else the language's default
    (:data:`DEFAULT_SCRIPTS`), else None. ``(None, None)`` for a missing or unreadable code.
    """
    if not code:
        return None, None
    match = _LANG_CODE.match(code.strip())
    if match is None:
        return None, None
    parts = re.split(r"[-_]", code.strip())
    language = parts[0].lower()
    language = _TO_TWO_LETTERS.get(language, language)
    script = next((p.title() for p in parts[1:] if len(p) == 4 and p.isalpha()), None)
    return language, script or DEFAULT_SCRIPTS.get(language)


def lang_languages(lang: pl.Series) -> pl.Series:
    """:func:`parse_lang`'s language for every code of a Series (parsed once per distinct code)."""
    lang = lang.cast(pl.String)
    table = {code: parse_lang(code)[0] for code in lang.drop_nulls().unique().to_list()}
    return lang.replace_strict(table, default=None, return_dtype=pl.String)


def language_of(code: str) -> str:
    """The language of a code (:func:`parse_lang`), or the code itself when it is none (a label
    of a model of one's own)."""
    return parse_lang(code)[0] or code


def known_languages() -> frozenset[str]:
    """The languages this module knows without a model: ISO 639-1's, the languages with a default
    script, lid.176's, and :data:`UNDETERMINED`."""
    return frozenset({*ISO639_1_TO_3, *DEFAULT_SCRIPTS, *THREE_LETTER_ALIASES.values(), *LID176_LABELS, UNDETERMINED})


def _label_languages(labels: Iterable[str]) -> dict[str, list[str]]:
    """The labels of a model by language (a label no code names stands for itself)."""
    by_language: dict[str, list[str]] = {}
    for label in labels:
        by_language.setdefault(language_of(label), []).append(label)
    by_language.setdefault(UNDETERMINED, [UNDETERMINED])
    return by_language


def nearest_code(code: str, labels: Iterable[str] | None = None) -> str | None:
    """The code nearest to ``code`` among ``labels`` (a model's; None: :func:`known_languages`),
    in their spelling: by a language's name (``english``: ``en``), else by spelling (difflib:
    ``englsh`` is nearest ``english``, so ``en``), else None."""
    by_language = _label_languages(sorted(known_languages()) if labels is None else labels)
    word = str(code).strip().lower()
    names = {name: lang for name, lang in LANGUAGE_NAMES.items() if lang in by_language}
    forms = {form: lang for lang in by_language for form in (lang, ISO639_1_TO_3.get(lang)) if form}
    labels_by_form = {label.lower(): lang for lang, found in by_language.items() for label in found}
    spellings = {**forms, **labels_by_form, **names}
    if word in spellings:
        return by_language[spellings[word]][0]
    near = difflib.get_close_matches(word, list(spellings), n=5)
    if not near:
        return None
    # Of spellings as close, the one that starts as the word does: "enn" is nearer "en" than "nn".
    best = max(
        near, key=lambda spelling: (difflib.SequenceMatcher(None, word, spelling).ratio(), _common(word, spelling))
    )
    return by_language[spellings[best]][0]


def _common(word: str, other: str) -> int:
    """How many characters ``word`` and ``other`` share at the start."""
    return len(os.path.commonprefix([word, other]))


def _hint(code: str, labels: Iterable[str] | None, codes: str) -> str:
    """The nearest code as a question, then ``codes`` (what codes are taken) in brackets; or
    ``codes`` alone, as the fix."""
    near = nearest_code(code, labels)
    return f"did you mean {near!r}? ({codes})" if near is not None and near != code else f"use {codes}"


def code_language(code, key: str) -> str:
    """The language ``code`` names (:func:`parse_lang`); ValueError with one line naming ``key``
    and the nearest code when it is no code: not a string, with whitespace or control characters
    (``"es\\n"``), or not of a code's form (``english``)."""
    if not isinstance(code, str):
        raise ValueError(f'{key}: {code!r} is not a language code; write codes as strings, such as "en"')
    if not code or any(c.isspace() or not c.isprintable() for c in code):
        stripped = "".join(c for c in code if c.isprintable() and not c.isspace())
        fix = f"write {stripped!r}" if parse_lang(stripped)[0] else "write a code such as 'en'"
        raise ValueError(f"{key}: {code!r} has whitespace or control characters in it; {fix}")
    language = parse_lang(code)[0]
    if language is None:
        raise ValueError(
            f"{key}: {code!r} is not a language code; "
            + _hint(code, None, "a code as the language-ID model gives it: en, de, zh for lid.176")
        )
    return language


def code_languages(codes: Iterable, key: str) -> dict[str, str]:
    """Each language ``codes`` name, with the code that names it; ValueError with one line for a
    code that is none (:func:`code_language`) and for two codes of one language (``zh`` and
    ``zho_Hans``: they would be one setting given twice)."""
    seen: dict[str, str] = {}
    for code in codes:
        language = code_language(code, key)
        if language in seen:
            raise ValueError(f"{key}: {seen[language]!r} and {code!r} name one language ({language}); keep one of them")
        seen[language] = code
    return seen


def check_model_codes(codes: Iterable[str], key: str, labels: Iterable[str], model: str) -> None:
    """ValueError with one line for the first of ``codes`` whose language the labels of the
    language-ID model ``model`` never give: a setting for a language no document can have."""
    labels = list(labels)
    by_language = _label_languages(labels)
    for code in codes:
        if language_of(code) not in by_language:
            common = [found[0] for lang in ("en", "de", "fr", "es", "zh") if (found := by_language.get(lang))]
            examples = ", ".join(common or sorted(labels)[:3])
            taken = (
                f"one of the {len(by_language) - 1} languages it gives, such as {examples}, as it "
                "writes it or by its ISO 639-1, 639-3 or BCP 47 code"
            )
            raise ValueError(f"{key}: {model} gives no language {code!r}; {_hint(code, labels, taken)}")
