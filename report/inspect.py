"""One document's way through a run: where it came from, what each stage measured and decided,
and where it ended (``curate inspect RUN DOC_ID`` prints it).

:func:`inspect_document` returns a plain dict (JSON-serializable) with these keys:

* ``id``, ``fate`` (one line: curated, or which stage removed it and why), ``removed_by`` (the
  stage, rule, value and threshold, or None);
* ``licence``: the document's licence (pipeline.licence);
* ``source``: source name, the input file and line/offset (from the id, or the input's own id),
  the unit's input files, the output shard and row, url, meta, text size and a preview;
* ``stages``: per stage that ran, ``status`` (kept, removed, passed through, not reached) and a
  ``detail`` line;
* ``lang``: language, score, threshold and the rule that removed it, if one did;
* ``filter``: every rule of the document's language (``settings``: the stage's, a
  ``[filter.by_lang]`` table or a built-in profile) on the text as it entered the filter stage
  (value, operator, threshold, whether it fires), read from the run's stored measurements
  (``measured``: ``stored``, or ``measured again`` where the run stored none), the rule that
  removes it (with ``match``: the list entry that rule's filter found, for the word and URL
  lists; ``notes``: every filter's), and what the filters changed;
* ``dedup``: its cluster (size, the kept document, Jaccard with it, exact) or None;
* ``lines``: the lines the repeated-line cut took from it;
* ``tokens``; ``mix``: group, side (train, validation, excluded, contaminated), for a document
  that left the pool the rule, the text that caused it (``near_id``) and the two in words
  (``cause``), and per mixture how many times it was taken (``plan.parquet`` repeats).

:func:`rule_removals` lists the documents a rule removed (``--rule``), :func:`document_texts` a
document's text as each stage left it (``--text``).

:func:`run_licences` gives the run's counts per licence (``curate inspect RUN`` without an id);
:func:`top_licences` cuts that table to the licences with the most documents and one row summing
the rest, for a table a person reads after every run.

A record the source stage quarantined has no document; an id derived from file and line
(``<source>/<file>:<line>``) finds it in the quarantine. An id not in the run raises
:class:`UnknownDocument` with near ids to suggest.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import polars as pl

from pipeline.formats.documents import LICENCE, MIX_NEAR_ID, MIX_RULE, UNKNOWN, mix_cause
from pipeline.formats.ledger import Ledger
from pipeline.formats.stats import StageStats
from pipeline.io.storage import scan_parquet
from pipeline.stages.registry import last_document_stage
from pipeline.stages.run import RunFiles
from pipeline.stages.verdicts import describe_settings, filter_verdicts, removal_notes
from pipeline.stages.verdicts import document_texts as verdicts_texts
from report.measure import measure_lang

PREVIEW_CHARS = 300
# Licences a table shows one by one after a run (real corpora name a hundred or more); the rest are summed.
TOP_LICENCES = 10
SUGGESTIONS = 3
RULE_ROWS = 20  # documents `curate inspect RUN --rule RULE` lists unless told


class UnknownDocument(LookupError):
    """No document of that id in the run; ``suggestions`` holds near ids."""

    def __init__(self, doc_id: str, suggestions: list[str]):
        self.doc_id = doc_id
        self.suggestions = suggestions
        hint = f"; did you mean {' or '.join(repr(s) for s in suggestions)}?" if suggestions else ""
        super().__init__(
            f"no document {doc_id!r} in this run{hint} (ids are <source>/<id>, as in the "
            "docs/*.parquet and removed/*.parquet files)"
        )


def _plain(value):
    """Python scalars only (numpy and float32 values become float/int)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def _find(run: RunFiles, stage: str, doc_id: str) -> tuple[dict | None, str | None, int | None]:
    """The document's row in the stage's output, its shard file name and row number."""
    for path in run.docs_files(stage):
        found = scan_parquet([path]).with_row_index("_row").filter(pl.col("id") == doc_id).collect()
        if found.height:
            row = found.row(0, named=True)
            return {k: v for k, v in row.items() if k != "_row"}, path.name, int(row["_row"])
    return None, None, None


def _removed_row(run: RunFiles, stage: str, doc_id: str) -> dict | None:
    removed = run.removed(stage)
    hit = removed.filter(pl.col("id") == doc_id)
    return {k: _plain(v) for k, v in hit.row(0, named=True).items()} if hit.height else None


def _suggest(run: RunFiles, doc_id: str) -> list[str]:
    frame = run.scan_docs("source", ["id"])
    if frame is None:
        return []
    ids = frame.collect()["id"]
    containing = ids.filter(ids.str.contains(doc_id, literal=True))
    if containing.len():
        return sorted(containing.to_list(), key=lambda s: (len(s), s))[:SUGGESTIONS]
    prefix = doc_id.split("/", 1)[0] + "/"
    same_source = ids.filter(ids.str.starts_with(prefix))
    pool = (same_source if same_source.len() else ids).head(200_000).to_list()
    return difflib.get_close_matches(doc_id, pool, n=SUGGESTIONS, cutoff=0.6)


def _input_position(run: RunFiles, source: str, doc_id: str) -> dict:
    """The input file and line or byte offset an id names (derived ids), or the input's own id."""
    config = run.config
    settings = next((s for s in (config.sources if config else []) if s.name == source), None)
    rest = doc_id[len(source) + 1 :] if doc_id.startswith(source + "/") else doc_id
    if settings is not None and settings.id_field is not None and settings.reader not in ("warc", "wet", "text"):
        return {"own_id": rest, "id_field": settings.id_field}
    if settings is not None and settings.reader in ("warc", "wet"):
        return {"own_id": rest, "id_field": "WARC-Record-ID"}
    match = re.fullmatch(r"(.*):(\d+)", rest)
    if match:
        return {"file": match.group(1), "line": int(match.group(2))}
    match = re.fullmatch(r"(.*)@(\d+)", rest)
    if match:
        return {"file": match.group(1), "offset": int(match.group(2))}
    return {"file": rest}


def _unit_files(run: RunFiles, shard: str | None) -> list[str]:
    """The input files of the source unit that wrote ``shard``."""
    for path in run.outputs("source", "parts"):
        part = json.loads(path.read_text(encoding="utf-8"))
        if any(s.get("file") == shard for s in part.get("shards", [])):
            return [f.get("path") for f in part.get("files", [])]
    return []


def _quarantined(run: RunFiles, doc_id: str) -> dict | None:
    """The quarantine record an id derived from file and line (or offset) points at."""
    records = run.quarantine()
    if records is None or "/" not in doc_id:
        return None
    source, rest = doc_id.split("/", 1)
    match = re.fullmatch(r"(.*)([:@])(\d+)", rest)
    if not match:
        return None
    file, kind, position = match.group(1), match.group(2), int(match.group(3))
    column = "line" if kind == ":" else "offset"
    hit = records.filter(
        (pl.col("source") == source) & (pl.col(column) == position) & pl.col("file").str.ends_with("/" + file)
    )
    return {k: _plain(v) for k, v in hit.row(0, named=True).items()} if hit.height else None


def inspect_document(run_dir: str | Path, doc_id: str) -> dict:
    """Everything the run's files say about document ``doc_id`` (see the module docstring)."""
    run = RunFiles.open(run_dir)
    row, shard, index = _find(run, "source", doc_id)
    if row is None:
        record = _quarantined(run, doc_id)
        if record is not None:
            return _quarantined_result(doc_id, record)
        raise UnknownDocument(doc_id, _suggest(run, doc_id))
    result = _source_result(run, doc_id, row, shard, index)
    last_stage, last_shard = _follow_stages(run, doc_id, row, shard, result)
    if result["removed_by"] is None and "tokenize" in run.stats:
        _add_tokens(run, doc_id, last_shard, result)
    if result["removed_by"] is None and "mix" in run.stats:
        _add_mix(run, doc_id, result)
    removed_by = result["removed_by"]
    if removed_by is None:
        result["fate"] = f"curated: in the output of {last_stage}" + (
            f", {result['mix']['side']} side of the mix" if result.get("mix") else ""
        )
    else:
        result["fate"] = f"removed by the {removed_by['stage']} stage: {_removal_line(removed_by)}"
    return result


def _quarantined_result(doc_id: str, record: dict) -> dict:
    """The lookup of an id the source stage quarantined: its quarantine record and why."""
    return {
        "id": doc_id,
        "fate": f"quarantined by the source stage: {record['reason']}",
        "removed_by": {"stage": "source", "rule": record["reason"], "value": None, "threshold": None},
        "quarantine": record,
        "source": {
            "source": record["source"],
            "file": record["file"],
            "line": record["line"],
            "offset": record["offset"],
        },
        "stages": [{"stage": "source", "status": "quarantined", "detail": record["reason"]}],
    }


def _meta(row: dict):
    """The row's meta, parsed from JSON where it parses (else as written); None without one."""
    if not row.get("meta"):
        return None
    try:
        return json.loads(row["meta"])
    except ValueError:
        return row["meta"]


def _source_result(run: RunFiles, doc_id: str, row: dict, shard: str, index: int) -> dict:
    """The lookup as the source stage leaves it: the licence, where the document came from (input
    file and position, the unit's files, shard and row) and its text's size and preview; every
    later stage's entry still empty."""
    text = row["text"]
    meta = _meta(row)
    files = _unit_files(run, shard)
    position = _input_position(run, row["source"], doc_id)
    if "file" in position:
        matching = [f for f in files if f.endswith("/" + position["file"]) or f == position["file"]]
        if matching:
            position["path"] = matching[0]
    elif len(files) == 1:
        position["path"] = files[0]
    return {
        "id": doc_id,
        "licence": row.get(LICENCE) or UNKNOWN,
        "source": {
            "source": row["source"],
            **position,
            "unit_files": files[:5],
            "unit_file_count": len(files),
            "shard": f"source/docs/{shard}",
            "row": index,
            "url": row.get("url"),
            "meta": meta,
            "chars": len(text),
            "bytes": len(text.encode("utf-8")),
            "preview": text[:PREVIEW_CHARS],
        },
        "stages": [{"stage": "source", "status": "kept", "detail": f"read into {shard}, row {index}"}],
        "removed_by": None,
        "lang": None,
        "filter": None,
        "dedup": None,
        "lines": None,
        "tokens": None,
        "mix": None,
    }


def _follow_stages(run: RunFiles, doc_id: str, row: dict, shard: str, result: dict) -> tuple[str, str]:
    """Each document stage after the source into ``result``: what it measured, and whether it kept
    or removed the document (stages after a removal: not reached). Returns the last stage that kept
    it and the shard it is in there."""
    last_row, last_stage, last_shard = row, "source", shard
    for stage in run.stages[1:]:
        if stage in ("tokenize", "mix"):
            continue
        entry = {"stage": stage}
        if result["removed_by"] is not None:
            result["stages"].append({**entry, "status": "not reached", "detail": ""})
            continue
        removed = _removed_row(run, stage, doc_id)
        kept_row, kept_shard, kept_index = _find(run, stage, doc_id)
        handler = {"lang": _lang, "filter": _filter, "dedup": _dedup, "lines": _lines}[stage]
        result[stage] = handler(run, last_row, kept_row, removed)
        if removed is not None:
            result["removed_by"] = {
                "stage": stage,
                "rule": removed["rule"],
                "value": removed["value"],
                "threshold": removed["threshold"],
            }
            if stage == "filter" and (result["filter"] or {}).get("match"):  # the list entry it matched
                result["removed_by"]["match"] = result["filter"]["match"]
            entry.update(status="removed", detail=_removal_line(result["removed_by"]))
        elif kept_row is not None:
            entry.update(status="kept", detail=f"{kept_shard}, row {kept_index}")
            last_row, last_stage, last_shard = kept_row, stage, kept_shard
        else:
            entry.update(status="missing", detail="in neither the stage's documents nor its removed files")
        result["stages"].append(entry)
    return last_stage, last_shard


def _add_tokens(run: RunFiles, doc_id: str, shard: str | None, result: dict) -> None:
    """The document's tokens (in ``shard`` of the last document stage) into ``result``."""
    result["tokens"] = _tokens(run, shard, doc_id)
    result["stages"].append(
        {
            "stage": "tokenize",
            "status": "kept",
            "detail": f"{result['tokens']} tokens" if result["tokens"] is not None else "",
        }
    )


def _add_mix(run: RunFiles, doc_id: str, result: dict) -> None:
    """Where the mix put the document into ``result``: its group and side, and for a document that
    left the pool (excluded, contaminated) the rule that took it out."""
    result["mix"] = _mix(run, doc_id)
    side = (result["mix"] or {}).get("side")
    left = side in ("excluded", "contaminated")
    if left:
        removed = _removed_row(run, "mix", doc_id)
        result["removed_by"] = {
            "stage": "mix",
            "rule": removed["rule"] if removed else result["mix"]["rule"],
            "value": removed["value"] if removed else None,
            "threshold": removed["threshold"] if removed else None,
        }
    detail = f"group {result['mix'].get('group')}, {side}" if result["mix"] else ""
    if result["mix"] and result["mix"]["cause"]:
        detail += f": {result['mix']['cause']}"
    result["stages"].append({"stage": "mix", "status": "removed" if left else "kept", "detail": detail})


def rule_removals(run_dir: str | Path, rule: str, limit: int | None = RULE_ROWS) -> dict:
    """The documents ``rule`` removed in the run (``curate inspect RUN --rule RULE``): ``rule``,
    ``stage``, ``count`` and ``documents`` (the first ``limit`` in file order, all when None:
    ``id``, ``source``, ``lang``, ``value``, ``threshold``, and ``match`` where the rule's filter
    noted the list entry the document matched). Raises
    :class:`pipeline.stages.run.UnknownRule` naming the rules the run has."""
    run = RunFiles.open(run_dir)
    removed = run.removed_by(rule)
    shown = removed if limit is None else removed.head(limit)
    documents = [
        {key: _plain(row[key]) for key in ("id", "source", "lang", "value", "threshold")}
        for row in shown.iter_rows(named=True)
    ]
    matched = removal_notes(run, shown) if removed["stage"][0] == "filter" else {}
    for document in documents:  # the list entry each one matched (word and URL lists)
        if document["id"] in matched:
            document["match"] = matched[document["id"]]
    return {"rule": rule, "stage": removed["stage"][0], "count": removed.height, "documents": documents}


def document_texts(run_dir: str | Path, doc_id: str) -> dict:
    """The document's text as each document stage left it (``curate inspect RUN DOC --text``):
    ``id`` and ``stages`` (pipeline.stages.verdicts.document_texts). Raises
    :class:`UnknownDocument`."""
    run = RunFiles.open(run_dir)
    texts = verdicts_texts(run, doc_id)
    if texts is None:
        raise UnknownDocument(doc_id, _suggest(run, doc_id))
    return {"id": doc_id, "stages": texts}


def run_licences(run_dir: str | Path) -> dict:
    """:func:`licence_table` of the run in ``run_dir``."""
    return licence_table(RunFiles.open(run_dir).stats)


def licence_table(stats: Mapping[str, StageStats]) -> dict:
    """Per licence, from a run's stats by stage: documents read (``read``), removed by the filter
    stage's licence rules (``removed_by_rule``), curated (``curated``, the last document stage's
    output), curated tokens (``tokens``, when the tokenize stage ran) and each mixture's training
    tokens (``mixtures``); licences by documents read, most first. Keys: ``stage`` (the last
    document stage) and ``licences``."""
    last = last_document_stage(stats)
    source, after, rules = (_licences(stats, stage) for stage in ("source", last, "filter"))
    tokens = stats["tokenize"].licences if "tokenize" in stats else None
    mixtures = (stats["mix"].mixtures if "mix" in stats else None) or {}
    read = {name: ledger.docs_out for name, ledger in source.items()}
    found = {}
    for name in sorted(set(source) | set(after), key=lambda n: (-read.get(n, 0), n)):
        removed = rules[name].removed if name in rules else {}
        found[name] = {
            "read": read.get(name, 0),
            "removed_by_rule": sum(n for rule, n in removed.items() if rule.startswith("licence.")),
            "curated": after[name].docs_out if name in after else 0,
            "tokens": tokens.get(name, {}).get("tokens", 0) if tokens is not None else None,
            "mixtures": {m: summary.get("licences", {}).get(name, 0) for m, summary in mixtures.items()},
        }
    return {"stage": last, "licences": found}


def _licences(stats: Mapping[str, StageStats], stage: str) -> dict[str, Ledger]:
    """The ledger per licence of ``stage`` (none where it did not run or counted none)."""
    return (stats[stage].licences if stage in stats else None) or {}


def top_licences(licences: Mapping[str, dict], top: int | None = TOP_LICENCES) -> tuple[dict[str, dict], dict | None]:
    """The first ``top`` rows of :func:`licence_table`'s ``licences`` (most documents read first;
    all when ``top`` is None) and one row summing the others, with ``licences`` (how many it sums),
    or None when there are no others. The sums are over the same keys as a licence's row."""
    names = list(licences)
    if top is None or len(names) <= top:
        return dict(licences), None
    rest = [licences[name] for name in names[top:]]
    mixtures = dict.fromkeys(m for row in rest for m in row["mixtures"])
    other = {
        "licences": len(rest),
        **{key: sum(row[key] for row in rest) for key in ("read", "removed_by_rule", "curated")},
        "tokens": None if any(row["tokens"] is None for row in rest) else sum(row["tokens"] for row in rest),
        "mixtures": {m: sum(row["mixtures"].get(m, 0) for row in rest) for m in mixtures},
    }
    return {name: licences[name] for name in names[:top]}, other


def _removal_line(removed: dict) -> str:
    line = str(removed["rule"])
    if removed.get("value") is not None:
        line += f" (value {removed['value']:.4g}"
        line += f", threshold {removed['threshold']:.4g})" if removed.get("threshold") is not None else ")"
    if removed.get("match"):
        line += f"; matched {removed['match']!r}"
    return line


def _lang(run: RunFiles, entered: dict, kept: dict | None, removed: dict | None) -> dict:
    config = run.config
    if kept is not None:
        lang, score = kept.get("lang"), _plain(kept.get("lang_score"))
    else:
        lang, score = (removed or {}).get("lang"), (removed or {}).get("value")
    out = {
        "lang": lang,
        "score": score,
        "threshold": None,
        "rule": (removed or {}).get("rule"),
        "keep": config.lang.keep if config else None,
    }
    if config is not None and lang is not None and score is not None:
        frame = pl.DataFrame({"lang": [lang], "lang_score": [float(score)]})
        decision = measure_lang(frame, config).row(0, named=True)
        out["threshold"] = _plain(decision["threshold"])
        out["measured_rule"] = decision["rule"]
    return out


def _filter(run: RunFiles, entered: dict, kept: dict | None, removed: dict | None) -> dict:
    """The filter stage's verdict on the document, with the rules and thresholds of its language,
    from the run's stored measurements (measured again with those rules where none are stored)."""
    config = run.config
    out: dict = {"in_scope": True, "rules": [], "first_rule": None, "recorded": removed, "errors": []}
    if config is None:
        out["errors"].append(f"the run's config could not be read back: {run.config_error}")
        return out
    outside = config.filter.scope().outside(entered["source"], entered.get("lang"))
    if outside is not None:
        out["in_scope"], out["outside"] = False, outside
        return out
    if removed is not None and str(removed["rule"]).startswith("licence."):
        out["first_rule"] = removed["rule"]  # removed by a licence rule, before any filter measured it
        return out
    verdicts = filter_verdicts(run, pl.DataFrame([entered]), config.filter)
    out["errors"] = [f"not measured: {error}" for error in verdicts.errors]
    out["settings"] = describe_settings(config.filter, verdicts.settings[0])
    out["measured"] = verdicts.found[0]
    for rule in verdicts.rules:
        threshold = verdicts.thresholds[rule.name][0]
        if threshold is None:  # not a rule of this document's language
            continue
        out["rules"].append(
            {
                "rule": rule.name,
                "filter": verdicts.filter_of[rule.name],
                "measure": rule.measure,
                "value": _plain(verdicts.values[rule.name][0]),
                "op": rule.op,
                "threshold": float(threshold),
                "counts": rule.counts,
                "fires": bool(verdicts.fires[rule.name][0]),
            }
        )
    out["first_rule"] = verdicts.rule[0]
    out["notes"] = {n: verdicts.notes[n][0] for n in verdicts.notes.columns if verdicts.notes[n][0] is not None}
    owner = (out["first_rule"] or "").split(".", 1)[0]
    out["match"] = "; ".join(v for n, v in out["notes"].items() if n.split(".", 1)[0] == owner) or None
    recorded = removed["rule"] if removed is not None else None
    if out["first_rule"] != recorded:
        out["errors"].append(
            f"{out['measured']}, the rules give {out['first_rule'] or 'kept'} where the run recorded "
            f"{recorded or 'kept'}: the filters or their settings changed since the run"
        )
    after = verdicts.text_after[0]
    out["chars_in"] = len(entered["text"])
    out["chars_after"] = len(after) if after is not None else 0
    if kept is not None:
        out["text_changed"] = kept["text"] != entered["text"]
        if "pii_replacements" in kept:
            out["pii_replacements"] = _plain(kept["pii_replacements"])
    return out


def _in_index(run: RunFiles, doc_id: str) -> dict | None:
    """The indexed document this one duplicates, when dedup removed it as in its index."""
    matches = run.index_matches()
    hit = matches.filter(pl.col("id") == doc_id) if matches is not None else None
    if hit is None or not hit.height:
        return None
    row = hit.row(0, named=True)
    keys = ("matched_id", "matched_run", "jaccard", "exact", "url", "via_id")
    return {key: _plain(row.get(key, False)) for key in keys}


def _dedup(run: RunFiles, entered: dict, kept: dict | None, removed: dict | None) -> dict:
    clusters = run.clusters()
    out: dict = {"in_cluster": False}
    in_index = _in_index(run, entered["id"])
    if in_index is not None:
        out["in_index"] = in_index
    if clusters is None:
        return out
    hit = clusters.filter(pl.col("id") == entered["id"])
    if not hit.height:
        return out
    row = hit.row(0, named=True)
    members = clusters.filter(pl.col("cluster") == row["cluster"])
    # A clusters table from before URL dedup has no url column: none is a URL copy there.
    url = members["url"] if "url" in members.columns else pl.Series([False] * members.height)
    removed, exact = ~members["kept"], members["exact"]
    out.update(
        in_cluster=True,
        cluster=_plain(row["cluster"]),
        cluster_size=_plain(row["cluster_size"]),
        kept=bool(row["kept"]),
        kept_id=row["kept_id"],
        jaccard=_plain(row["jaccard"]),
        exact=bool(row["exact"]),
        url=bool(row.get("url", False)),
        removed_exact=int((removed & exact).sum()),
        removed_url=int((removed & ~exact & url).sum()),
        removed_near=int((removed & ~exact & ~url).sum()),
    )
    return out


def _lines(run: RunFiles, entered: dict, kept: dict | None, removed: dict | None) -> dict:
    config = run.config
    outside = config.lines.scope().outside(entered["source"], entered.get("lang")) if config else None
    out: dict = {"in_scope": outside is None, **({"outside": outside} if outside else {})}
    after = kept["text"] if kept is not None else ""
    left = Counter(after.split("\n"))
    cut = []
    for line in entered["text"].split("\n"):
        if left[line] > 0:
            left[line] -= 1
        elif line.strip():
            cut.append(line)
    out.update(
        lines_cut=len(cut), chars_cut=len(entered["text"]) - len(after), cut=cut[:10], left_blank=removed is not None
    )
    return out


def _tokens(run: RunFiles, shard: str | None, doc_id: str) -> int | None:
    from pipeline.formats.tokens import read_token_shard

    if shard is None:
        return None
    path = run.root / "tokenize" / "shards" / f"{Path(shard).stem}.arrow"
    if not path.is_file():
        return None
    _, offsets = read_token_shard(path)
    hit = offsets.filter(pl.col("doc_id") == doc_id)
    return int(hit["doc_tokens"][0]) if hit.height else None


def _mix(run: RunFiles, doc_id: str) -> dict | None:
    documents = run.mix_documents()
    if documents is None:
        return None
    hit = documents.filter(pl.col("id") == doc_id)
    if not hit.height:
        return None
    row = hit.row(0, named=True)
    out = {
        "group": row["group"],
        "side": row["split"],
        "tokens": _plain(row["tokens"]),
        "bytes": _plain(row["bytes"]),
        "rule": row.get(MIX_RULE),
        "near_id": row.get(MIX_NEAR_ID),
        "cause": mix_cause(row.get(MIX_RULE), row.get(MIX_NEAR_ID)),
        "mixtures": {},
    }
    for name in run.mixture_names():
        plan = run.plan(name)
        repeats = None
        if plan is not None:
            found = plan.filter(pl.col("id") == doc_id)
            repeats = int(found["repeats"][0]) if found.height else None
        out["mixtures"][name] = {
            "repeats": repeats,
            "note": {None: "not in the training plan", 0: "not taken"}.get(repeats, ""),
        }
    return out
