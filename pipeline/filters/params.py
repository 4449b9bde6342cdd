"""The types of the filters' thresholds, with the bounds their meaning gives them. A filter's
constructor annotates its parameters with these; the config's check of ``[filter.params.<name>]``
(pipeline.config) reads them from its signature, so ``min_words = -5`` stops the run with one line
before any work."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from annotated_types import Ge, Interval

# A number of things a document or line has (words, sentences, stop words, characters): none or more.
Count = Annotated[int, Ge(0)]
# A length measured in characters on average: none or more.
Length = Annotated[float, Ge(0)]
# A share of a document (of its words, lines, characters): between 0 and 1.
Fraction = Annotated[float, Interval(ge=0, le=1)]
# A ratio of two counts that may pass 1 (newlines per word): none or more.
Ratio = Annotated[float, Ge(0)]
# A share that must leave something (the top fraction of documents kept): above 0, at most 1.
Share = Annotated[float, Interval(gt=0, le=1)]
# A size of word n-gram: 2 words or more.
NgramSize = Annotated[int, Ge(2)]
# A threshold per n-gram size (Gopher's repetition rules): ``{5: 0.15}`` sets the 5-gram rule's;
# the sizes it does not name keep their defaults, and None turns a size's rule off.
NgramFractions = Mapping[NgramSize, Fraction | None]
# Model files by language code (``{ en = "en.bin", fr = "fr.bin" }``): a language without one passes.
LangPaths = Mapping[str, str | Path]
