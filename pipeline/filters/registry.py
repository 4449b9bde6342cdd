"""The filters a config can name, and building them from a config with checked parameters."""

from __future__ import annotations

import inspect

from pipeline.filters.classifier import FastTextClassifier, is_named_classifier, named_classifier
from pipeline.filters.heuristics import HEURISTIC_FILTERS
from pipeline.filters.perplexity import KenLMPerplexity
from pipeline.filters.pii import PIIScrubber
from pipeline.filters.quality import QualityFilter
from pipeline.filters.urls import URLBlocklist
from pipeline.filters.wordlists import C4BadWords


class _Filters(dict):
    """The filters by name, and the classifiers named ``classifier_<name>``: each the external
    classifier under a name of its own, so that several run in one stage."""

    def __missing__(self, name: str) -> type:
        if is_named_classifier(name):
            return named_classifier(name)
        raise KeyError(name)

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or (isinstance(name, str) and is_named_classifier(name))

    def get(self, name, default=None):
        return self[name] if name in self else default


FILTERS: dict[str, type] = _Filters(
    {
        **HEURISTIC_FILTERS,
        "pii": PIIScrubber,
        "quality": QualityFilter,  # needs params.quality.model: a model made by `curate train-quality`
        # an external fastText model by its path (params.classifier.model), DCLM's or any other
        "classifier": FastTextClassifier,
        # CCNet's perplexity under the user's KenLM models, per language (needs curate[kenlm])
        "perplexity": KenLMPerplexity,
        "c4_badwords": C4BadWords,  # needs params.c4_badwords.lists: the user's word lists
        "url_blocklist": URLBlocklist,  # needs domains, urls or substrings: the user's URL lists
    }
)


def filter_parameters(name: str) -> list[str]:
    """The threshold and option names a filter's constructor takes."""
    return [p for p in inspect.signature(FILTERS[name]).parameters if p != "name"]


def filter_notes(name: str) -> tuple[str, ...]:
    """The notes a filter records beside its measures (``FilterOutput.notes``: the list entry a
    document matched), as its class names them in ``notes``; none for most filters."""
    return tuple(getattr(FILTERS.get(name), "notes", ()))


def build_filters(names: list[str], params: dict[str, dict]) -> list:
    return [FILTERS[name](**params.get(name, {})) for name in names]
