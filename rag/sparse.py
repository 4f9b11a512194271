"""BM25 over the index's passages, beside the dense vectors (hybrid retrieval, issue 21).

The sparse index lives in ``<index_dir>/bm25/`` (bm25s' own files: a CSC matrix of term weights
and the vocabulary), written by the same ``build-index`` run as the usearch graphs and recorded
in ``meta.json`` (``sparse``: format version, library version, parameters, passage count). Terms
are :func:`passage_terms`: the project's tokeniser (matras and viramas stay inside a word, the
danda and other punctuation separate, ZWJ/ZWNJ dropped, native digits read as ASCII), lower-cased,
minus the stopwords of the passage's language.

BM25 parameters: bm25s' defaults (Lucene variant, k1 1.5, b 0.75), the usual values for short
web passages (Robertson & Zaragoza, 2009, "The Probabilistic Relevance Framework").
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag.errors import IndexCorruptError
from rag.text import content_tokens
from rag.types import Passage

log = logging.getLogger(__name__)

SPARSE_DIR = "bm25"
SPARSE_VERSION = 1
"""Format of ``bm25/`` and of the terms it was built from; a change means a rebuild."""
K1, B = 1.5, 0.75
REBUILD = "python -m ragtools build-index"


def passage_terms(text: str, lang: str | None) -> list[str]:
    """BM25 terms of a passage or query: :func:`rag.text.content_tokens` (stopwords of ``lang``,
    or of every language when None, as for a query whose language is a guess)."""
    return content_tokens(text, lang)


def _bm25s():
    # imported on first use, only where a sparse index is built or read (its import time:
    # docs/benchmarks.md, "Figures behind the code's constants")
    import bm25s

    # bm25s sets up its own DEBUG-level logger: its "Building index from tokens" line would
    # interleave with build-index's progress and the console's chat
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


def build_sparse(passages: list[Passage], index_dir: Path) -> dict:
    """Index ``passages`` (labels 0..n-1 in this order) with BM25 into ``index_dir/bm25``.

    Returns the ``sparse`` entry of ``meta.json``."""
    bm25s = _bm25s()
    retriever = bm25s.BM25(k1=K1, b=B)
    retriever.index([passage_terms(p.text, p.lang) or [""] for p in passages],
                    show_progress=False)
    retriever.save(str(Path(index_dir) / SPARSE_DIR), show_progress=False)
    return {"version": SPARSE_VERSION, "library": f"bm25s {bm25s.__version__}", "k1": K1,
            "b": B, "n_passages": len(passages), "n_terms": len(retriever.vocab_dict)}


@dataclass
class SparseIndex:
    """The BM25 index of a :class:`~rag.index.PassageIndex`; labels are the dense index's."""

    retriever: object
    vocab: dict[str, int]
    n_passages: int

    @classmethod
    def load(cls, index_dir: Path, entry: dict | None, n_passages: int) -> SparseIndex:
        """Read ``index_dir/bm25`` as described by ``meta.json``'s ``entry``.

        Raises:
            IndexCorruptError: no entry, another format version, missing or unreadable files,
                or a passage count that is not the dense index's (one line naming the fix).
        """
        folder = Path(index_dir) / SPARSE_DIR
        if not entry:
            raise IndexCorruptError(f"{index_dir} has no BM25 index (built before hybrid "
                                    f"retrieval): rebuild it with `{REBUILD}`, or set "
                                    "VOICE_RAG_RETRIEVAL=dense")
        if entry.get("version") != SPARSE_VERSION:
            raise IndexCorruptError(f"{folder} is BM25 format {entry.get('version')}, this code "
                                    f"reads {SPARSE_VERSION}: rebuild with `{REBUILD}`")
        try:
            retriever = _bm25s().BM25.load(str(folder), mmap=True, show_progress=False)
            n_docs = int(retriever.scores["num_docs"])
        except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
            raise IndexCorruptError(f"BM25 index {folder} is damaged ({type(exc).__name__}: "
                                    f"{exc}): rebuild with `{REBUILD}`") from None
        if n_docs != n_passages or entry.get("n_passages") != n_passages:
            raise IndexCorruptError(f"BM25 index {folder} holds {n_docs} passages (meta.json says "
                                    f"{entry.get('n_passages')}), the dense index {n_passages}: "
                                    f"rebuild with `{REBUILD}`")
        return cls(retriever, retriever.vocab_dict, n_passages)

    def scores(self, terms: list[str]) -> np.ndarray:
        """float32 (n_passages,): BM25 score of every passage for ``terms`` (0 where none
        matches); terms outside the vocabulary are ignored."""
        known = [t for t in terms if t in self.vocab]
        if not known:
            return np.zeros(self.n_passages, dtype=np.float32)
        return np.asarray(self.retriever.get_scores(known), dtype=np.float32)
