"""The mixture folder format, ``curate.mixture/1``: its one owner. The mix stage (flows.mix) and the
experiment's held-out folder (experiment) write it through these names and this manifest;
the trainer (trainer.data) and the export (:func:`export_mixture`) read it through
:func:`read_manifest`.

A mixture folder::

    manifest.json                 format, tokenizer (file, sha256, vocab size, dtype, special ids),
                                  per group tokens, epochs and validation counts, documents and
                                  tokens per licence (per group and in all), and every shard
                                  (file, group, documents, tokens, bytes, sha256) of each split
    tokenizer.json                the tokenizer the shards were written with
    plan.parquet                  id, group, tokens, repeats of every training document (mix stage)
    common_windows.parquet        windows the decontamination judged common text (when it ran)
    README.md                     the dataset card (pipeline.stages.card), for people and the Hub
    train/<group>-<nnnn>.arrow    token shards (pipeline.formats.tokens), a group's in number order
    validation/<group>-<nnnn>.arrow

A group's name becomes a file name by :func:`pipeline.formats.names.group_file_stem` (``news/en`` ->
``news+en``).
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

from pipeline.formats.configfile import ConfigError
from pipeline.formats.hf import write_hf_split
from pipeline.formats.megatron import write_indexed_dataset
from pipeline.formats.names import group_file_stem
from pipeline.formats.nanogpt import write_meta_pkl
from pipeline.formats.tokens import export_bin, file_sha256, load_tokenizer
from pipeline.io.owner import ForeignFolderError, claim, remove_written
from pipeline.io.storage import LocationError, as_path, is_file, is_local, output_location
from pipeline.io.writer import atomic_path

MIXTURE_FORMAT = "curate.mixture/1"
MANIFEST_FILE = "manifest.json"
TOKENIZER_FILE = "tokenizer.json"
PLAN_FILE = "plan.parquet"
COMMON_WINDOWS_FILE = "common_windows.parquet"
CARD_FILE = "README.md"
SPLITS = ("train", "validation")
MANIFEST_KEYS = ("tokenizer", "groups", "train", "validation")


class MixtureError(ConfigError):
    """A mixture folder that cannot be read; the message is one line naming the file and the fix
    (a user's error: a ConfigError, so every command stops on it with that line)."""


def shard_file(split: str, group: str, number: int) -> str:
    """A shard's path relative to the mixture folder: ``train/news+en-0000.arrow``."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    return f"{split}/{group_file_stem(group)}-{number:04d}.arrow"


def tokenizer_entry(tokenizer, tokenizer_file: Path) -> dict:
    """The manifest's ``tokenizer`` entry for ``tokenizer`` (a ``tokenizers.Tokenizer``) saved as
    ``tokenizer_file`` in the mixture folder."""
    from pipeline.formats.tokens import file_sha256, special_ids, token_dtype

    ids = special_ids(tokenizer)
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    return {
        "file": TOKENIZER_FILE,
        "sha256": file_sha256(tokenizer_file),
        "vocab_size": vocab_size,
        "dtype": token_dtype(vocab_size).name,
        "eod_id": ids["eod"],
        "pad_id": ids["pad"],
        "mask_id": ids["mask"],
        "cls_id": ids["cls"],
    }


def shard_entry(file: str, group: str, documents: int, tokens: int, size: int, sha256: str) -> dict:
    """One shard of the manifest's ``train`` or ``validation`` list (``size``: UTF-8 bytes of the
    documents' text, for bits per byte)."""
    return {"file": file, "group": group, "documents": documents, "tokens": tokens, "bytes": size, "sha256": sha256}


def manifest(
    mixture: str, seed: int, tokenizer: dict, groups: dict, train: list[dict], validation: list[dict], **extra
) -> dict:
    """A mixture manifest: the format, the mixture's name, the seed, the tokenizer entry, the
    groups, the shards of each split, and ``extra`` keys (budget, weighting, decontamination)."""
    return {
        "format": MIXTURE_FORMAT,
        "mixture": mixture,
        "seed": seed,
        "tokenizer": tokenizer,
        **extra,
        "groups": groups,
        "train": train,
        "validation": validation,
    }


def read_manifest(folder: Path) -> dict:
    """The manifest of the mixture folder ``folder`` (a local or fsspec path), checked: present,
    valid JSON, this format, every key with its type (:func:`check_manifest`), every file it
    names inside the folder, and the tokenizer file present. A failure raises
    :class:`MixtureError` with one line."""
    path = folder / MANIFEST_FILE
    try:
        found = is_file(path, str(folder))
    except LocationError as error:
        raise MixtureError(str(error)) from None
    if not found:
        raise MixtureError(
            f"no {MANIFEST_FILE} in {folder}; point at a folder the mix stage wrote (<run_dir>/mix/<mixture>)"
        )
    try:
        found = json.loads(path.read_bytes())
    except json.JSONDecodeError as error:
        raise MixtureError(f"{path} is not valid JSON ({error}); re-run the mix stage") from None
    if not isinstance(found, dict) or found.get("format") != MIXTURE_FORMAT:
        shown = found.get("format") if isinstance(found, dict) else None
        raise MixtureError(
            f"{path} has format {shown!r}, not {MIXTURE_FORMAT!r}; re-run the mix stage with this version"
        )
    check_manifest(found, path)
    tokenizer = tokenizer_path(folder, found)
    if not tokenizer.is_file():
        raise MixtureError(f"no tokenizer at {tokenizer}; the manifest names it, re-run the mix stage")
    return found


# The keys of a shard entry and of the tokenizer entry that readers use, with their JSON types.
SHARD_KEYS = {"file": str, "group": str, "documents": int, "tokens": int, "bytes": int, "sha256": str}
TOKENIZER_KEYS = {"sha256": str, "vocab_size": int, "eod_id": int, "pad_id": int, "mask_id": int, "cls_id": int}
_TYPE_NAMES = {str: "a string", int: "a whole number >= 0", dict: "an object", list: "a list"}


def _typed(value, kind: type) -> bool:
    if kind is int:  # JSON's true is not a count, nor is a negative number
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return isinstance(value, kind)


def _check_value(value, kind: type, where: str, path) -> None:
    if value is None:
        raise MixtureError(f"{path}: {where} is missing; re-run the mix stage")
    if not _typed(value, kind):
        shown = repr(value) if len(repr(value)) <= 40 else f"a {type(value).__name__}"
        raise MixtureError(f"{path}: {where} is {shown}, not {_TYPE_NAMES[kind]}; re-run the mix stage")


def inside_path(name: str, where: str, path) -> str:
    """``name``, a file name the manifest ``path`` gives at ``where``, checked to stay inside the
    mixture folder: relative, no ``..`` part, no NUL. A manifest names only the files the mix stage
    wrote there, so a reader never opens a file outside the folder on a manifest's word."""
    parts = PurePosixPath(name).parts
    if not parts or name.startswith("/") or ".." in parts or "\\" in name or "\0" in name:
        raise MixtureError(
            f"{path}: {where} is {name!r}, a path outside the mixture folder; "
            "a manifest names files inside its folder, re-run the mix stage"
        )
    return name


def check_manifest(found: dict, path) -> None:
    """Check a mixture manifest's structure (``path``: where it was read, for the message): every
    key of :data:`MANIFEST_KEYS`, the tokenizer entry's :data:`TOKENIZER_KEYS`, ``groups`` an
    object, each split a list of shard entries with :data:`SHARD_KEYS`, every file name inside the
    folder (:func:`inside_path`). Raises :class:`MixtureError` with one line."""
    for key in MANIFEST_KEYS:
        if key not in found:
            raise MixtureError(f"{path} lacks {key!r}; re-run the mix stage")
    _check_value(found["tokenizer"], dict, "'tokenizer'", path)
    _check_value(found["groups"], dict, "'groups'", path)
    for name, figures in found["groups"].items():
        _check_value(figures, dict, f"groups.{name}", path)
    for key, kind in TOKENIZER_KEYS.items():
        _check_value(found["tokenizer"].get(key), kind, f"tokenizer.{key}", path)
    _check_value(found["tokenizer"].get("file", TOKENIZER_FILE), str, "tokenizer.file", path)
    inside_path(found["tokenizer"].get("file", TOKENIZER_FILE), "tokenizer.file", path)
    for split in SPLITS:
        _check_value(found[split], list, repr(split), path)
        for number, entry in enumerate(found[split]):
            _check_value(entry, dict, f"{split}[{number}]", path)
            for key, kind in SHARD_KEYS.items():
                _check_value(entry.get(key), kind, f"{split}[{number}].{key}", path)
            inside_path(entry["file"], f"{split}[{number}].file", path)


def tokenizer_path(folder: Path, found: dict) -> Path:
    """The tokenizer file of a mixture folder, as its manifest (``found``) names it."""
    return folder / found["tokenizer"].get("file", TOKENIZER_FILE)


def verify_files(folder: Path, found: dict) -> None:
    """Check the tokenizer file and every shard of the mixture folder ``folder`` against the sha256
    its manifest ``found`` records: a file changed or truncated since the mix stage raises
    :class:`MixtureError` naming it."""
    tokenizer = tokenizer_path(folder, found)
    if file_sha256(tokenizer) != found["tokenizer"]["sha256"]:
        raise MixtureError(
            f"{tokenizer} differs from the manifest's tokenizer (sha256), so it is not the one the shards "
            "were written with; run the mix stage again"
        )
    for entry in [*found["train"], *found["validation"]]:
        shard = folder / entry["file"]
        if not shard.is_file() or file_sha256(shard) != entry["sha256"]:
            raise MixtureError(f"{shard} is missing or differs from the manifest (sha256); run the mix stage again")


def _export_nanogpt(shards: list[Path], out_dir: Path, split: str) -> tuple[str, dict]:
    name = "train.bin" if split == "train" else "val.bin"
    return name, export_bin(shards, out_dir / name)


def _export_megatron(shards: list[Path], out_dir: Path, split: str) -> tuple[str, dict]:
    entry = write_indexed_dataset(shards, out_dir / ("train" if split == "train" else "val"))
    return entry["file"], entry


def _export_hf(shards: list[Path], out_dir: Path, split: str) -> tuple[str, dict]:
    name = f"{split}.arrow"
    return name, write_hf_split(shards, out_dir / name)


# Export format -> writer of one split: (its shards, the out folder, the split) -> (file name, entry).
EXPORT_FORMATS = {"nanogpt": _export_nanogpt, "megatron": _export_megatron, "hf": _export_hf}


def _claim_export_folder(mixture_dir, out_dir: Path) -> None:
    """Take ``out_dir`` for an export (pipeline.io.owner): new, empty, or an earlier export's,
    whose files are removed first; never a folder inside the run or mixture folder it reads.
    Raises ValueError with one line."""
    source = Path(mixture_dir).resolve() if is_local(mixture_dir) else None
    if source is not None:
        run = source.parent.parent  # <run_dir>/mix/<mixture>
        inside = run if (run / "manifest.json").is_file() and source.parent.name == "mix" else source
        out = Path(out_dir).resolve()
        if out == inside or inside in out.parents:
            raise ForeignFolderError(
                f"{str(out)!r} is inside {str(inside)!r}, which the export reads; export to a folder outside it"
            )
    claim(out_dir, "export")
    remove_written(out_dir)  # an earlier export here: its files go, whatever its format


def export_mixture(mixture_dir: Path, out_dir: Path, verify: bool = True, format: str = "nanogpt") -> dict:
    """Write a mixture folder (the mix stage's ``<run>/mix/<mixture>/``) for another trainer, in
    ``format`` (one of :data:`EXPORT_FORMATS`):

    * ``nanogpt``: ``train.bin`` and ``val.bin``, flat uint16 tokens, documents separated by the
      end-of-document id (:func:`pipeline.formats.tokens.export_bin`);
    * ``megatron``: Megatron-LM's indexed datasets ``train`` and ``val`` (``.bin`` + ``.idx``,
      one sequence per document; :mod:`pipeline.formats.megatron`);
    * ``hf``: ``train.arrow`` and ``validation.arrow``, Arrow streams that Hugging Face
      ``datasets.Dataset.from_file`` memory-maps (:mod:`pipeline.formats.hf`);

    and with each ``tokenizer.json``, ``meta.json`` (the format, vocabulary size, special ids,
    what each file holds, the documents and tokens per licence) and the mixture's dataset card
    ``README.md``; with ``nanogpt``, also nanoGPT's ``meta.pkl`` (:mod:`pipeline.formats.nanogpt`).

    With ``verify``, the tokenizer's and every shard's sha256 are checked against the mixture's
    manifest first (:func:`verify_files`), so a changed or truncated file stops the export. The
    mixture folder may be remote (an fsspec URL); ``out_dir`` is a local folder. Returns the content
    of ``meta.json``."""
    if format not in EXPORT_FORMATS:
        raise ValueError(f"--format: {format!r} is not an export format; use one of {', '.join(EXPORT_FORMATS)}")
    # Before any work: a URL, a file, or a path under a file is one line (a LocationError).
    out_dir = output_location(
        out_dir,
        folder=True,
        local="the export writes memory-mapped .bin files to a local folder: "
        "export to a local folder, then copy it (e.g. with your object store's CLI)",
    )
    mixture_dir = as_path(mixture_dir)
    manifest = read_manifest(mixture_dir)
    if verify:
        verify_files(mixture_dir, manifest)
    _claim_export_folder(mixture_dir, out_dir)
    files = {}
    for split in SPLITS:
        name, entry = EXPORT_FORMATS[format]([mixture_dir / e["file"] for e in manifest[split]], out_dir, split)
        files[name] = {**entry, "bytes_of_text": sum(e["bytes"] for e in manifest[split])}
    with atomic_path(out_dir / TOKENIZER_FILE) as tmp:
        tmp.write_bytes(tokenizer_path(mixture_dir, manifest).read_bytes())
    if format == "nanogpt":  # nanoGPT's train.py takes the vocabulary size from meta.pkl alone
        write_meta_pkl(load_tokenizer(out_dir / TOKENIZER_FILE), out_dir)
    card = mixture_dir / CARD_FILE
    if card.is_file():  # the dataset card goes with the data
        with atomic_path(out_dir / CARD_FILE) as tmp:
            tmp.write_bytes(card.read_bytes())
    meta = {
        "mixture": manifest["mixture"],
        "format": format,
        "dtype": next(iter(files.values()))["dtype"],
        **{k: v for k, v in manifest["tokenizer"].items() if k not in ("file", "dtype")},
        "files": files,
        **({"licences": manifest["licences"]} if "licences" in manifest else {}),
    }
    with atomic_path(out_dir / "meta.json") as tmp:
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return meta
