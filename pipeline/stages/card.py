"""A dataset card for each mixture: ``mix/<mixture>/README.md``, in the shape of a Hugging Face
dataset card (a YAML header the Hub reads, then Markdown).

The card says what the mixture is made of and how: the sources with their licences and input
checksums, each curation step with its config and what it removed, the groups with their weights,
epochs and tokens, the tokens per licence, the tokenizer, the held-out split and its
decontamination, the package versions, and the limitations the run's own figures show. It is
written from the run's files alone (``manifest.json``, each stage's ``stats.json``, the mixture's
``manifest.json``), by the mix stage when it finishes and again by ``curate report``; the same
files give the same bytes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from pipeline.formats.documents import UNKNOWN
from pipeline.formats.escape import cell, code, code_block, inline
from pipeline.formats.ledger import Ledger
from pipeline.formats.mixture import CARD_FILE
from pipeline.io.writer import write_text
from pipeline.licence import licence_parts
from pipeline.stages.run import RunFiles

# Licence identifiers the Hugging Face Hub knows that are SPDX identifiers in lower case; any
# other licence is "other" in the header (and named in the card's body).
HUB_LICENCES = frozenset(
    """
    apache-2.0 mit afl-3.0 artistic-2.0 bsl-1.0 bsd-2-clause bsd-3-clause bsd-3-clause-clear cc0-1.0
    cc-by-2.0 cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0
    cc-by-nc-4.0 cc-by-nd-4.0 cc-by-nc-nd-3.0 cc-by-nc-nd-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0
    cc-by-nc-sa-4.0 cdla-sharing-1.0 cdla-permissive-1.0 cdla-permissive-2.0 wtfpl ecl-2.0 epl-1.0
    epl-2.0 etalab-2.0 eupl-1.1 eupl-1.2 agpl-3.0 gfdl gpl-2.0 gpl-3.0 lgpl-2.1 lgpl-3.0 isc
    lppl-1.3c ms-pl mpl-2.0 odc-by odbl osl-3.0 postgresql ofl-1.1 ncsa unlicense zlib pddl
    """.split()
)
SPDX_NAMES = {"odc-by-1.0": "odc-by", "odbl-1.0": "odbl", "pddl-1.0": "pddl"}
# Inputs listed one by one in the card; the run's manifest.json lists them all.
LISTED_INPUTS = 50
TOP_RULES = 8
MIN_LANGUAGE_SHARE = 0.005  # of the curated documents, for a language to be listed in the header


def write_cards(run_dir) -> list[Path]:
    """Write the card of every mixture of the run; return their paths."""
    run = RunFiles.open(run_dir)
    written = []
    for name in run.mixture_names():
        path = run.root / "mix" / name / CARD_FILE
        write_text(render_card(run, name), path)
        written.append(path)
    return written


def hub_licences(licences) -> tuple[list[str], list[str]]:
    """The Hub's ``license`` values for ``licences`` (SPDX, from the mixture's manifest): its ids
    for those it knows, ``other`` for the rest (returned second, to be named), ``unknown``."""
    hub, other = set(), set()
    for licence in licences:
        for part in licence_parts(licence):
            key = SPDX_NAMES.get(part.lower(), part.lower())
            # The Hub names the GNU licences by version only (gpl-3.0 for -only and -or-later).
            key = re.sub(r"-(only|or-later)$", "", key) if key.startswith(("gpl-", "lgpl-", "agpl-")) else key
            if part == UNKNOWN:
                hub.add(UNKNOWN)
            elif key in HUB_LICENCES:
                hub.add(key)
            else:
                hub.add("other")
                other.add(part)
    return sorted(hub) or [UNKNOWN], sorted(other)


def card_languages(languages: dict[str, Ledger]) -> tuple[list[str], list[str]]:
    """The language codes of the curated documents (a stage's ``languages`` ledgers) with at least
    :data:`MIN_LANGUAGE_SHARE` of them, for the header, and the others (a few documents each:
    mostly language ID's mistakes on short or mixed text), for the body."""
    counts = {code: v.docs_out for code, v in languages.items() if code != "und" and v.docs_out}
    total = sum(counts.values())
    listed = sorted(code for code, n in counts.items() if n >= MIN_LANGUAGE_SHARE * total)
    return listed, sorted(set(counts) - set(listed))


def _config(run: RunFiles) -> dict:
    """The run's config as ``manifest.json`` records it: a plain dict, read even when it no longer
    validates (a model or tokenizer moved since), so the card depends on the run's files alone."""
    found = run.manifest.get("config")
    return found if isinstance(found, dict) else {}


def _size_category(n: int) -> str:
    bounds = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")]
    bounds += [(10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B")]
    return next((label for bound, label in bounds if n < bound), "n>1B")


def _n(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}" if not value.is_integer() else f"{int(value):,}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _table(headers: list[str], rows: list[list]) -> str:
    """A Markdown table of rendered cells (user text in them already :func:`inline` or :func:`code`)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "–"


def render_card(run: RunFiles, name: str) -> str:
    """The dataset card of mixture ``name`` of ``run``, as Markdown with a YAML header."""
    mixture = run.mixture_manifest(name)
    manifest = run.manifest
    licences = mixture.get("licences", {})
    hub, other = hub_licences(licences)
    train_docs = sum(g.get("documents_taken", 0) for g in mixture["groups"].values())
    languages, _ = card_languages(_curated_languages(run))
    header = {
        "license": hub[0] if len(hub) == 1 else hub,
        **({"license_name": ", ".join(other)} if other else {}),
        **({"language": languages} if languages else {}),
        "pretty_name": _title(run, name),
        "size_categories": [_size_category(train_docs)],
        "task_categories": ["text-generation"],
        "tags": ["pretraining", "curated", "tokenized"],
    }
    body = [
        _summary(run, name, mixture),
        _licences(mixture),
        _sources(run),
        _steps(run),
        _groups(mixture),
        _tokenizer(run, mixture),
        _held_out(run, mixture),
        _versions(manifest),
        _limitations(run, mixture),
        _files(),
    ]
    return "---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True) + "---\n\n" + "\n".join(body)


def _title(run: RunFiles, name: str) -> str:
    """The mixture's name and its sources (not the run folder's name: the card of the same run
    made in another folder is the same)."""
    sources = [str(src.get("name")) for src in _config(run).get("sources", [])]
    return f"mixture {name}" + (f" of {', '.join(sources)}" if sources else "")


def _summary(run: RunFiles, name: str, mixture: dict) -> str:
    tokens = mixture.get("tokens_taken", 0)
    groups = len(mixture["groups"])
    return (
        f"# {inline(_title(run, name))}\n\n"
        f"A pretraining mixture of {_n(tokens)} training tokens in {groups} group(s), written by this run's mix "
        f"stage as token shards (format {code(mixture.get('format'))}), with a held-out validation split. Budget "
        f"{_n(mixture.get('budget_tokens'))} tokens, shortfall {_n(mixture.get('shortfall_tokens'))}; seed "
        f"{_n(mixture.get('seed'))}. Every figure below is read from the run's files.\n" + _languages_line(run)
    )


def _curated_languages(run: RunFiles) -> dict[str, Ledger]:
    """The language ledgers of the run's last document stage (none where it counted none)."""
    last = run.stats.get(run.last_document_stage or "")
    return (last.languages if last else None) or {}


def _languages_line(run: RunFiles) -> str:
    if "lang" not in run.stats:
        return ""
    listed, others = card_languages(_curated_languages(run))
    line = f"\nLanguages of the curated documents (lang stage), each at least {MIN_LANGUAGE_SHARE:.1%} of them: "
    line += inline(", ".join(listed)) or "none"
    if others:
        line += f"; {len(others)} more below that share ({inline(', '.join(others))})"
    return line + ".\n"


def _licences(mixture: dict) -> str:
    licences = mixture.get("licences", {})
    if not licences:
        return "## Licences\n\nThis mixture's manifest records no licences (written before licences were kept).\n"
    tokens = sum(v.get("tokens_taken", 0) for v in licences.values())
    rows = [
        [
            code(licence),
            _n(v.get("documents_taken")),
            _n(v.get("tokens_taken")),
            _share(v.get("tokens_taken", 0), tokens),
            _n(v.get("validation_documents")),
            _n(v.get("validation_tokens")),
        ]
        for licence, v in sorted(licences.items(), key=lambda item: (-item[1].get("tokens_taken", 0), item[0]))
    ]
    per_group = []
    for group, figures in mixture["groups"].items():
        for licence, v in figures.get("licences", {}).items():
            per_group.append([inline(group), code(licence), _n(v.get("documents_taken")), _n(v.get("tokens_taken"))])
    return (
        "## Licences\n\nEach document's licence as its source declared it or its record named it (SPDX; "
        "`LicenseRef-` for a licence outside the SPDX list; `unknown` where the input named none). Training "
        "tokens count every copy of a repeated document.\n\n"
        + _table(
            [
                "licence",
                "training documents",
                "training tokens",
                "share of tokens",
                "validation documents",
                "validation tokens",
            ],
            rows,
        )
        + "\nBy group:\n\n"
        + _table(["group", "licence", "training documents", "training tokens"], per_group)
    )


def _sources(run: RunFiles) -> str:
    source_stats = run.stats.get("source")
    read_by_source = (source_stats.sources if source_stats else None) or {}
    rows = []
    for src in _config(run).get("sources", []):
        counts = read_by_source.get(src.get("name"))
        licence, field = src.get("licence", UNKNOWN), src.get("licence_field")
        declared = f"field {code(field)}, else {code(licence)}" if field else code(licence)
        rows.append(
            [
                inline(src.get("name")),
                inline(src.get("reader")),
                _n(counts.files if counts else None),
                _n(counts.docs_in if counts else None),
                _n(counts.docs_out if counts else None),
                declared,
            ]
        )
    inputs = run.manifest.get("inputs", [])
    listed = [[inline(i.get("path")), _n(i.get("bytes")), code(i.get("sha256"))] for i in inputs[:LISTED_INPUTS]]
    more = (
        f"\n{len(inputs) - LISTED_INPUTS:,} more input files are listed with their checksums in the run's "
        "`manifest.json` (`inputs`).\n"
        if len(inputs) > LISTED_INPUTS
        else ""
    )
    read = (source_stats.licences if source_stats else None) or {}
    by_licence = [[code(k), _n(v.docs_out)] for k, v in read.items()]
    return (
        "## Sources\n\n"
        + _table(["source", "reader", "files", "records", "documents read", "licence"], rows)
        + "\nDocuments read per licence:\n\n"
        + _table(["licence", "documents"], by_licence)
        + f"\nInput files ({len(inputs):,}), with their SHA-256:\n\n"
        + _table(["file", "bytes", "sha256"], listed)
        + more
    )


def _steps(run: RunFiles) -> str:
    config = _config(run)
    out = [
        "## Curation steps\n\nIn run order; each removes documents by the rules counted here (the run's "
        "`<stage>/removed/*.parquet` name every removed document and its rule).\n"
    ]
    for stage, stats in run.stats.items():
        removed = sorted(stats.removed.items(), key=lambda item: (-item[1], item[0]))
        quarantined = sum(stats.quarantined.values())
        line = (
            f"\n### {inline(stage)}\n\n{_n(stats.docs_in)} documents in, {_n(stats.docs_out)} out, "
            f"{_n(sum(n for _, n in removed))} removed"
            + (f", {_n(quarantined)} quarantined (unreadable records)" if quarantined else "")
            + ".\n"
        )
        if removed:
            rows = [[code(rule), _n(n), _share(n, stats.docs_in)] for rule, n in removed[:TOP_RULES]]
            line += "\n" + _table(["rule", "documents", "share of the stage's input"], rows)
            if len(removed) > TOP_RULES:
                line += f"\nand {len(removed) - TOP_RULES} more rules (the stage's `stats.json`).\n"
        settings = config.get(stage) if stage != "source" else None
        if settings is not None:
            line += "\nConfig:\n\n" + code_block(json.dumps(settings, indent=1), "json")
        out.append(line)
    return "".join(out)


def _groups(mixture: dict) -> str:
    rows = [
        [
            inline(group),
            _n(g.get("documents_available")),
            _n(g.get("tokens_available")),
            _n(g.get("target_weight")),
            _n(g.get("effective_weight")),
            _n(g.get("epochs")),
            _n(g.get("capped")),
            _n(g.get("documents_taken")),
            _n(g.get("tokens_taken")),
        ]
        for group, g in mixture["groups"].items()
    ]
    weighting = mixture.get("weighting", {})
    how = (
        f"temperature {weighting['temperature']}"
        if "temperature" in weighting
        else f"weights {_weights(weighting.get('weights'))} (default {weighting.get('default_weight')})"
    )
    return f"## Groups\n\nWeighted by {how}, at most {_n(mixture.get('max_epochs'))} epochs per group.\n\n" + _table(
        [
            "group",
            "documents available",
            "tokens available",
            "target weight",
            "effective weight",
            "epochs",
            "capped",
            "documents taken",
            "tokens taken",
        ],
        rows,
    )


def _weights(weights) -> str:
    """A mixture's explicit weights, ``group weight`` each (group names as Markdown text)."""
    return ", ".join(f"{inline(group)} {weight}" for group, weight in (weights or {}).items()) or "none"


def _tokenizer(run: RunFiles, mixture: dict) -> str:
    tok = mixture.get("tokenizer", {})
    given = _config(run).get("tokenize", {})
    kind = given.get("kind") if not given.get("tokenizer") else None
    return (
        f"## Tokenizer\n\n{code(tok.get('file'))} ({inline(kind or 'given')}), vocabulary "
        f"{_n(tok.get('vocab_size'))}, token dtype {inline(tok.get('dtype'))}, end-of-document id "
        f"{tok.get('eod_id')}; SHA-256 {code(tok.get('sha256'))}. "
        "Every mixture of the run and its validation split use this one tokenizer.\n"
    )


def _held_out(run: RunFiles, mixture: dict) -> str:
    mix = run.stats.get("mix")
    settings = _config(run).get("mix")
    held_docs = sum(g.get("validation_documents", 0) for g in mixture["groups"].values())
    held_tokens = sum(g.get("validation_tokens", 0) for g in mixture["groups"].values())
    lines = [
        "## Held-out split\n\n",
        f"{_n(held_docs)} validation documents ({_n(held_tokens)} tokens), chosen per group by a seeded hash of "
        "each document's id before any mixture was drawn; the same split serves every mixture of the run.",
    ]
    if settings is not None:
        lines.append(
            f" Fraction {settings.get('validation_fraction')} per group, at most "
            f"{_n(settings.get('validation_max_docs'))} documents per group."
        )
    removed = mix.removed if mix else {}
    if settings is not None and settings.get("decontaminate"):
        lines.append(
            f" Training documents that near-duplicate a validation document (MinHash, Jaccard at least "
            f"{settings.get('contamination_threshold')}) were dropped: "
            f"{_n(removed.get('validation_near_duplicate', 0))}."
        )
    exclusion = (mix.exclusion if mix else None) or {}
    if exclusion:
        lines.append(
            f" Before the split, documents holding text of {_n(exclusion.get('texts'))} excluded reference texts "
            f"left the pool: {_n(exclusion.get('by_id', 0))} by id, {_n(exclusion.get('near_duplicate', 0))} as near "
            f"duplicates, {_n(exclusion.get('window', 0))} by shared token windows."
        )
    decon = mixture.get("decontamination")
    if decon:
        lines.append(
            f" Windows of {decon.get('ngram')} tokens in more than {decon.get('common_window_docs')} documents were "
            f"judged common text ({_n(decon.get('common_windows'))}, in {code(decon.get('common_windows_file'))})."
        )
    return "".join(lines) + "\n"


def _versions(manifest: dict) -> str:
    versions = manifest.get("versions", {}).items()
    rows = [[inline(name), inline(version or "not installed")] for name, version in versions]
    return "## Versions\n\n" + _table(["package", "version"], rows)


def _limitations(run: RunFiles, mixture: dict) -> str:
    items = []
    licences = mixture.get("licences", {})
    tokens = sum(v.get("tokens_taken", 0) for v in licences.values())
    unknown = licences.get(UNKNOWN, {}).get("tokens_taken", 0)
    if unknown:
        items.append(
            f"{_share(unknown, tokens)} of the training tokens ({_n(unknown)}) come from documents whose input named "
            "no licence (`unknown`). Their terms are not known; exclude them with `[filter] exclude_licences = "
            '["unknown"]` where that matters.'
        )
    parts = {part for licence in licences for part in licence_parts(licence)}
    refs = sorted(p for p in parts if p.startswith("LicenseRef-"))
    if refs:
        items.append(f"Licences outside the SPDX list, kept as the inputs named them: {inline(', '.join(refs))}.")
    restricted = sorted(p for p in parts if "CC" in p.split("-") and {"NC", "ND"} & set(p.split("-")))
    if restricted:
        items.append(f"Some documents carry non-commercial or no-derivatives terms: {inline(', '.join(restricted))}.")
    if parts - {UNKNOWN}:
        items.append(
            "Licences are what the inputs state; the pipeline does not verify them, and a page's licence link "
            "may cover only part of the page."
        )
    repeated = [g for g, v in mixture["groups"].items() if (v.get("epochs") or 0) > 1]
    if repeated:
        items.append(f"Groups repeated more than once in the training side: {inline(', '.join(repeated))}.")
    if mixture.get("shortfall_tokens"):
        items.append(f"The mixture fell {_n(mixture['shortfall_tokens'])} tokens short of its budget (epoch caps).")
    config = _config(run)
    if config:
        scope = config.get("filter", {}).get("sources")
        if "filter" in run.stats and scope is not None:
            items.append(
                f"The quality filters applied to the sources {inline(', '.join(scope))} only; other sources were not "
                "quality-filtered."
            )
        if "filter" not in run.stats:
            items.append("No quality filter ran.")
        if "dedup" in run.stats:
            dedup = config.get("dedup", {})
            items.append(
                f"Near-duplicates below Jaccard {dedup.get('threshold')} (on {dedup.get('ngram')}-word shingles) "
                "remain."
            )
        else:
            items.append("No deduplication ran.")
        if "lang" not in run.stats:
            items.append("No language identification ran.")
    items.append(
        "The shards hold token ids; the text is in the run's documents (`<stage>/docs/*.parquet`), and "
        "`plan.parquet` names every training document and its repeats."
    )
    return "## Known limitations\n\n" + "".join(f"- {item}\n" for item in items)


def _files() -> str:
    return (
        "## Files\n\n"
        "- `manifest.json`: the tokenizer, the groups, per-licence figures, and every shard with its SHA-256.\n"
        "- `tokenizer.json`: the tokenizer the shards were written with.\n"
        "- `plan.parquet`: id, group, tokens and repeats of every training document.\n"
        "- `train/*.arrow`, `validation/*.arrow`: token shards (Arrow IPC; one row per document).\n"
    )
