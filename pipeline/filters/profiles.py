"""The filter stage's built-in rules per language: the parameters, for the languages whose writing
the published (English) rules misread, that make a rule count in that language what it counts in
English. They apply under ``[filter] language_profiles = true`` (the default), below the user's
``[filter.by_lang.<code>]`` tables, and only to the filters the stage runs.

Each entry says what it corrects and how that was found:

* ``th``, ``lo``: Thai and Lao mark no sentence end (a space separates sentences, and Unicode
  gives neither script a ``Sentence_Terminal``), so C4's terminal-line rule removed every line and
  its sentence rule every document, and FineWeb's line-punctuation ratio was 0 on every document:
  all 4 Thai dialogue documents of the demo's text were removed by ``c4_quality.min_sentences``.
  The rules that count sentence ends are off for them (FineWeb's ratio of 0 is not measured).
* ``hy``: Armenian's full stop is ``։`` (U+0589), but on the web it is often typed as the ASCII
  colon its keyboards put in that place: in the lines of five words or more of Common Crawl's
  Armenian pages that we read, 6 ended in ``։`` and 5 in ``:``. Both end a line for C4 and FineWeb.
* ``ko``: a Hangul character is a syllable of two or three letters, so Korean words are short in
  characters: 2.9 to 4.5 characters on average on the 11 Korean pages of a Common Crawl sample
  (7.3 to 9.4 letters), and 2 of the 2 Korean UDHR documents of ``benchmarks/filter_languages.py``
  fell under Gopher's minimum of 3, which English text (about 4.5 to 5) sits well above. The
  minimum is 2 for Korean.
"""

from __future__ import annotations

NO_SENTENCE_MARKS = {
    "c4_quality": {"min_sentences": 0, "filter_no_terminal_punct": False},
    "fineweb_quality": {"line_punct_exclude_zero": True},
}

LANGUAGE_PROFILES: dict[str, dict[str, dict]] = {
    "th": NO_SENTENCE_MARKS,
    "lo": NO_SENTENCE_MARKS,
    "hy": {"c4_quality": {"extra_end_marks": [":"]}, "fineweb_quality": {"extra_stop_chars": [":"]}},
    "ko": {"gopher_quality": {"min_mean_word_length": 2}},
}
