"""Random text through the real pipeline: how many of N random strings are answered (issue 34:
the target is none; its finding and the runs: docs/benchmarks.md, "Random text, lexical support
and the danda (issue 34)").

    python scripts/fuzz_text.py [--n 10000] [--seed 34] [--index data/index]

The strings are Hypothesis's, from the strategy the tests use (standins/random_input.py:
``random_text``: characters drawn from Devanagari, Gujarati, Telugu and Latin, emoji, CJK,
digits and punctuation, combining, zero-width and bidi marks, whitespace; empty to 5,000
characters), generated only (no shrinking), from a fixed seed. The pipeline is the production
one (``Pipeline.from_settings``: the configured encoder, hybrid retrieval, the fitted gate).
Prints the strings run and distinct, the outcomes by status and reason code, by the language
the pipeline read, the seconds taken, and every answered string with its trace.
Needs the dev extras (hypothesis).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402

from rag.pipeline import Pipeline  # noqa: E402
from rag.settings import RagSettings  # noqa: E402
from standins.random_input import random_text  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="strings to run (default 10000)")
    parser.add_argument("--seed", type=int, default=34, help="Hypothesis seed (default 34)")
    parser.add_argument("--index", help="index folder (default VOICE_RAG_INDEX_DIR or data/index)")
    args = parser.parse_args(argv)
    rag = RagSettings.from_env().with_overrides(args.index)
    pipeline = Pipeline.from_settings(rag)
    outcomes: Counter = Counter()
    langs: Counter = Counter()
    seen: set[str] = set()
    answered: list = []
    n_run = 0

    @seed(args.seed)
    @settings(max_examples=args.n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(query=random_text())
    def run(query: str) -> None:
        nonlocal n_run
        n_run += 1
        seen.add(query)
        result = pipeline.ask(query)
        code = result.reason.code.value if result.reason else "-"
        outcomes[(result.status.value, code)] += 1
        langs[result.lang] += 1
        if result.shows_answer or result.status.value == "error":
            answered.append(result)

    start = time.perf_counter()
    run()
    took_s = time.perf_counter() - start
    n_answered = sum(n for (status, _), n in outcomes.items() if status in ("answered", "hedged"))
    print(f"random strings: {n_run} run, {len(seen)} distinct, seed {args.seed}, "
          f"{took_s:.0f} s ({1000 * took_s / max(n_run, 1):.1f} ms each)")
    print(f"encoder {pipeline.encoder.name}, index {rag.index_dir}")
    print(f"answered (confident or hedged): {n_answered}")
    print("outcomes (status, reason code):")
    for (status, code), n in outcomes.most_common():
        print(f"  {status:<22} {code:<22} {n:>6}")
    print("language read: " + ", ".join(f"{lang} {n}" for lang, n in langs.most_common()))
    for result in answered:
        print(f"\n{result.status.value}: {result.query!r} -> {result.answer[:120]!r}")
        for stage in result.trace.stages:
            print(f"  {stage.name}: {stage.decision}: {stage.detail[:160]}")
    return 1 if n_answered else 0


if __name__ == "__main__":
    sys.exit(main())
