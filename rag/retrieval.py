"""Language-aware retrieval over a :class:`~rag.index.PassageIndex`.

- Explicit language: hard filter, only that language's graph is searched.
- Auto-detected language: a pool of ``pool_factor * k`` best passages over all languages (by
  cosine); passages in the query's language get ``language_bonus`` added to their rank score;
  the top ``k`` by rank score are returned. The cosine itself is never changed: the relevance
  guard compares the raw cosine of the top hit with the floor.
- Hybrid (:func:`fuse`, issue 21): that dense ranking over a pool of ``pool_factor * k`` is fused
  with the BM25 ranking (:mod:`rag.sparse`) of the same scope, per language as ``rag/fusion.json``
  says; the relevance guard still compares the dense ranking's top cosine (the seed's rule).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag.errors import ModelFileError
from rag.index import ALL, PassageIndex
from rag.settings import RagSettings
from rag.sparse import passage_terms
from rag.types import LANGUAGES, Hit


def retrieve(
    index: PassageIndex,
    vector: np.ndarray,
    lang: str,
    k: int,
    *,
    is_explicit: bool,
    language_bonus: float = 0.03,
    pool_factor: int = 3,
) -> list[Hit]:
    """Top ``k`` hits for a query vector (float32, shape (dim,), L2-normalised), best first."""
    if is_explicit:
        return [
            Hit(index.passages[label], score, score)
            for label, score in index.search(vector, lang, k)
        ]
    pool = index.search(vector, ALL, k * pool_factor)
    hits = []
    for label, score in pool:
        passage = index.passages[label]
        bonus = language_bonus if passage.lang == lang else 0.0
        hits.append(Hit(passage, score, score + bonus))
    hits.sort(key=lambda h: h.rank_score, reverse=True)
    return hits[:k]


FUSION_METHODS = ("rrf", "weighted")
RRF_K = 60
"""Reciprocal rank fusion's constant (Cormack, Clarke & Büttcher, SIGIR 2009: k = 60, which one
of the two systems this project grew from uses as well)."""


@dataclass(frozen=True, slots=True)
class Fusion:
    """How one language's dense and BM25 rankings are fused (``rag/fusion.json``).

    ``rrf``: ``w / (RRF_K + dense rank) + (1 - w) / (RRF_K + sparse rank)``, a missing rank adding
    nothing. ``weighted``: ``w * dense + (1 - w) * sparse``, each score min-max scaled to 0-1
    over the union of both pools (dense: cosine plus the language bonus; sparse: BM25)."""

    method: str
    dense_weight: float

    def __post_init__(self) -> None:
        if self.method not in FUSION_METHODS:
            raise ValueError(f"fusion method {self.method!r} not in {FUSION_METHODS}")
        if not 0.0 <= self.dense_weight <= 1.0:
            raise ValueError(f"dense_weight {self.dense_weight} not within 0-1")


def _scaled(values: np.ndarray) -> np.ndarray:
    span = float(values.max() - values.min()) if len(values) else 0.0
    return (values - values.min()) / span if span > 0 else np.ones_like(values)


def fuse(
    index: PassageIndex,
    vector: np.ndarray,
    dense_pool: list[Hit],
    sparse_scores: np.ndarray,
    lang: str,
    k: int,
    fusion: Fusion,
    language_bonus: float = 0.0,
) -> list[Hit]:
    """Top ``k`` of the dense pool (best first, as :func:`retrieve` ranks it) fused with the
    BM25 ranking of the same size.

    Args:
        vector: the query, float32 (dim,), L2-normalised: gives the cosine (``Hit.score``) of
            passages that only BM25 found.
        sparse_scores: float32 (n_passages,), BM25 of every passage, 0 outside the searched
            language (:meth:`PassageIndex.sparse_scores`).
        language_bonus: added to the cosine of passages in ``lang`` in the weighted fusion's
            dense score, as :func:`retrieve` does in auto-detected mode (0 when explicit).
    """
    n_pool = len(dense_pool)
    positive = np.flatnonzero(sparse_scores > 0)
    order = positive[np.argsort(-sparse_scores[positive], kind="stable")][:n_pool]
    sparse_rank = {int(label): r for r, label in enumerate(order, 1)}
    dense_rank = {index.label_of(h.passage.id): r for r, h in enumerate(dense_pool, 1)}
    labels = list(dense_rank) + [label for label in sparse_rank if label not in dense_rank]
    cosines = {index.label_of(h.passage.id): h.score for h in dense_pool}
    only_sparse = [label for label in labels if label not in cosines]
    if only_sparse:
        cosines.update(zip(only_sparse, (index.vectors(only_sparse) @ vector).tolist(),
                           strict=True))
    w = fusion.dense_weight
    if fusion.method == "rrf":
        fused = [(w / (RRF_K + dense_rank[label]) if label in dense_rank else 0.0)
                 + ((1 - w) / (RRF_K + sparse_rank[label]) if label in sparse_rank else 0.0)
                 for label in labels]
    else:
        dense = np.array([cosines[label] + (language_bonus if index.passages[label].lang == lang
                                            else 0.0) for label in labels])
        sparse = np.array([float(sparse_scores[label]) for label in labels])
        fused = (w * _scaled(dense) + (1 - w) * _scaled(sparse)).tolist()
    hits = [Hit(index.passages[label], float(cosines[label]), float(f), dense_rank.get(label),
                sparse_rank.get(label)) for label, f in zip(labels, fused, strict=True)]
    hits.sort(key=lambda h: h.rank_score, reverse=True)
    return hits[:k]


FUSION_PATH = Path(__file__).with_name("fusion.json")
REFIT_FUSION = "python3 scripts/fit_fusion.py"


def load_fusion(path: Path = FUSION_PATH) -> dict[str, Fusion]:
    """The per-language fusion of ``path``: ``{"languages": {"hi": {"method": "rrf",
    "dense_weight": 0.5}, "en": null, ...}}`` (null: dense retrieval for that language).

    Raises:
        ModelFileError: the file is missing, not JSON, or a language's entry is misshapen
            (one line naming the file and the refit command).
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        fusion = {lang: Fusion(str(entry["method"]), float(entry["dense_weight"]))
                  for lang, entry in data["languages"].items()
                  if entry is not None and lang in LANGUAGES}
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelFileError(f"cannot read the fusion file {path} ({type(exc).__name__}: {exc}): "
                             f"restore it from the repository or rerun {REFIT_FUSION}, or set "
                             "VOICE_RAG_RETRIEVAL=dense") from None
    return fusion


def search(index: PassageIndex, settings: RagSettings, fusion: Fusion | None, text: str,
           vector: np.ndarray, lang: str, is_explicit: bool,
           k: int | None = None) -> tuple[list[Hit], float | None]:
    """The top ``k`` (default ``settings.top_k``) hits for a query, best first, and the cosine
    of the dense ranking's first hit, which the relevance floor compares (None: nothing found).

    Dense (:func:`retrieve`) without ``fusion``; with it the dense pool of
    ``pool_factor * k`` is fused with BM25 over the query language's passages (:func:`fuse`).
    ``text`` is the searched text, ``vector`` its float32 (dim,) embedding."""
    k = settings.top_k if k is None else k
    if fusion is None:
        hits = retrieve(index, vector, lang, k, is_explicit=is_explicit,
                        language_bonus=settings.language_bonus, pool_factor=settings.pool_factor)
        return hits, (hits[0].score if hits else None)
    # The seed's candidate pool, ranked as retrieve ranks it: its first hit is the seed's.
    pool = retrieve(index, vector, lang, k * settings.pool_factor, is_explicit=is_explicit,
                    language_bonus=settings.language_bonus, pool_factor=1)
    # BM25 over the query language's passages only, also when the language was detected: the
    # English words of a code-mixed Hindi question would otherwise pull in English passages
    # (docs/benchmarks.md: hybrid retrieval per language).
    sparse = index.sparse_scores(passage_terms(text, None), lang)
    bonus = 0.0 if is_explicit else settings.language_bonus
    hits = fuse(index, vector, pool, sparse, lang, k, fusion, bonus)
    return hits, (pool[0].score if pool else None)
