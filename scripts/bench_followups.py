"""What reading a message with the conversation's previous turn costs (issue 44).

    python scripts/bench_followups.py [--index DIR] [--rounds 3] [--plot docs/img/FILE.png]

For every training follow-up pair (``eval/followups/train_*.jsonl``) the first question is asked,
then the second message twice, in alternating order so both see the same load: alone
(``Pipeline.ask``) and after the first (``after=`` the turn as the chat layer keeps it). Prints
the medians and 95th percentiles of the ``followup`` stage's own time (what the reading adds:
the search with the context and the decision) and of the whole pipeline both ways, with their
ratio. The embedding cache is cleared before each second message, so neither side finds its
own text embedded; the previous question's vector is kept, as in a chat (it was just asked).
Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag.embedding_cache import EmbeddingCache  # noqa: E402
from rag.followup import previous_turn, turn_after  # noqa: E402
from rag.pipeline import Pipeline  # noqa: E402
from rag.settings import RagSettings  # noqa: E402

PAIRS = sorted((ROOT / "eval" / "followups").glob("train_*.jsonl"))


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0-1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(pipeline: Pipeline, rows: list[dict], rounds: int) -> dict[str, list[float]]:
    """Milliseconds per message: ``stage`` (the followup stage), ``after`` and ``alone`` (the
    whole pipeline, by its trace)."""
    out: dict[str, list[float]] = {"stage": [], "after": [], "alone": []}
    for r in range(rounds):
        for k, row in enumerate(rows):
            turn = turn_after(pipeline.ask(row["first"]["question"]))
            sides = ("alone", "after") if (k + r) % 2 else ("after", "alone")
            key = ("query", previous_turn(turn).question)  # as it was embedded when asked
            kept = pipeline.embeddings.get(key)
            for side in sides:
                pipeline.embeddings = EmbeddingCache()
                if kept is not None:
                    pipeline.embeddings.put(key, kept)
                start = time.perf_counter()
                result = pipeline.ask(row["question"], after=turn if side == "after" else None)
                out[side].append((time.perf_counter() - start) * 1000)
                stage = result.trace.get("followup")
                if stage is not None:
                    out["stage"].append(stage.elapsed_ms)
    return out


def plot(ms: dict[str, list[float]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.boxplot([ms["stage"], ms["alone"], ms["after"]], showfliers=False)
    ax.set_xticks([1, 2, 3], ["followup stage", "message alone", "message after a turn"])
    ax.set_ylabel("ms")
    ax.set_title("Reading a message with the previous turn (same run)", fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    print(f"written {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", type=Path, default=RagSettings.from_env().index_dir)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--limit", type=int, default=0, help="first N pairs only (0: all)")
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args(argv)
    pipeline = Pipeline.from_settings(replace(RagSettings.from_env(), index_dir=args.index))
    rows = [json.loads(line) for path in PAIRS for line in path.open(encoding="utf-8")]
    rows = rows[:args.limit] if args.limit else rows
    ms = measure(pipeline, rows, args.rounds)
    for name in ("stage", "alone", "after"):
        print(f"{name:<6} n={len(ms[name]):>4}  P50 {statistics.median(ms[name]):7.1f} ms  "
              f"P95 {pct(ms[name], 0.95):7.1f} ms")
    p50 = statistics.median(ms["after"]) / statistics.median(ms["alone"])
    p95 = pct(ms["after"], 0.95) / pct(ms["alone"], 0.95)
    print(f"after / alone: P50 {p50:.2f}x, P95 {p95:.2f}x")
    if args.plot:
        plot(ms, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
