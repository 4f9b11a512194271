"""What the durable inbox costs per update: three committed writes (stored, sending, done).

    python scripts/bench_inbox.py [--n 300]

Times, on a fresh SQLite file in a temporary folder (WAL, synchronous=FULL, as the bot opens
it), ``Inbox.add`` + ``mark_sending`` + ``finish`` for ``n`` real-looking updates, against the
commit every question already paid before the inbox (``Database.record_decision``), measured in
the same run. Prints medians and P95 in milliseconds and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag.types import Result, Status, Trace  # noqa: E402
from storage.db import Database  # noqa: E402
from storage.inbox import Inbox  # noqa: E402


def update_json(update_id: int) -> str:
    return json.dumps({"update_id": update_id, "message": {
        "message_id": update_id, "date": int(time.time()), "text": "How much does an Xbox cost?",
        "chat": {"id": 42, "type": "private"}, "from": {"id": 42, "is_bot": False,
                                                        "first_name": "Asha"}}})


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with await Database.open(Path(tmp) / "bench.sqlite3") as db:
            inbox = Inbox(db)
            inbox_ms, decision_ms = [], []
            for i in range(1, n + 1):
                start = time.perf_counter()
                await inbox.claim("telegram", f"42/{i}/0", 42, update_json(i))
                await inbox.mark_sending("telegram", f"42/{i}/0")
                await inbox.finish("telegram", f"42/{i}/0", "replied n_messages=1", i)
                inbox_ms.append((time.perf_counter() - start) * 1e3)
                start = time.perf_counter()
                await db.record_decision("telegram", 42, i, 42, "text", Result(
                    Status.REFUSED_NO_MATCH, "q", "en", top_score=0.7, floor=0.84,
                    message="top 0.700 < floor 0.840 (en)", trace=Trace()))
                decision_ms.append((time.perf_counter() - start) * 1e3)

    def p95(xs: list[float]) -> float:
        return sorted(xs)[int(0.95 * (len(xs) - 1))]

    a, b = statistics.median(inbox_ms), statistics.median(decision_ms)
    print(f"n={n}  inbox (3 commits) P50 {a:.2f} ms P95 {p95(inbox_ms):.2f} ms;  "
          f"record_decision (1 commit) P50 {b:.2f} ms P95 {p95(decision_ms):.2f} ms;  "
          f"ratio {a / b:.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    asyncio.run(main(parser.parse_args().n))
