"""Writing an index folder (the layout :mod:`rag.index` reads and checks): passages encoded in
batches of similar token length, saved chunk by chunk so a killed build resumes, then one
usearch graph per language and one over all, ``passages.jsonl``, the BM25 index and
``meta.json``. ``python -m ragtools build-index`` runs it; the bot's start-up does too, only
when ``BOT_BUILD_INDEX=1``."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from tqdm import tqdm
from usearch.index import Index

from rag.corpus import corpus_hash, write_passages
from rag.encoders import Encoder
from rag.index import ALL, GRAPHS, INDEX_VERSION, IndexMeta, SearchParams
from rag.sparse import build_sparse
from rag.types import Passage

log = logging.getLogger(__name__)


BATCH_TOKENS = 8192
"""Token budget of one encoder call during a build: a batch of passages of similar length holds
at most this many tokens (longest passage x count), and at most ``batch_size`` passages."""
CHUNK_PASSAGES = 512
"""Passages per chunk file of a build in progress (``.build/chunk-NNNNN.npy``, 0.75 MB each): a
killed build loses at most one chunk's work (seconds: docs/benchmarks.md, "Figures behind the
code's constants") and resumes from the next."""
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
        text_scheme=getattr(encoder, "text_scheme", None),
    )
    (index_dir / "meta.json").write_text(
        json.dumps(asdict(meta), indent=2) + "\n", encoding="utf-8"
    )
    shutil.rmtree(work_dir, ignore_errors=True)  # the index is complete: chunks no longer needed
    return meta
