"""Language-aware retrieval over a :class:`~rag.index.PassageIndex`.

- Explicit language: hard filter, only that language's graph is searched.
- Auto-detected language: a pool of ``pool_factor * k`` best passages over all languages (by
  cosine); passages in the query's language get ``language_bonus`` added to their rank score;
  the top ``k`` by rank score are returned. The cosine itself is never changed: the relevance
  guard compares the raw cosine of the top hit with the floor.
"""

from __future__ import annotations

import numpy as np

from rag.index import ALL, PassageIndex
from rag.types import Hit


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
