"""What the WhatsApp front end adds to a typed question, and how fast Meta gets its 200.

    python scripts/bench_whatsapp.py [--n 40]     # index: VOICE_RAG_INDEX_DIR or data/index

Runs the front end (``bot.whatsapp.app.serving``) on 127.0.0.1 against the Graph API stand-in and
POSTs ``n`` signed webhooks carrying the shared sample's first ``n`` questions (English and
Hindi, as they come), twice: one at a time, then all at once (a burst). For each it measures,
in milliseconds: the webhook's answer (POST until 200: signature, parse, the claim committed
to SQLite), the reply (POST until the stand-in received the reply), and the pipeline's own
time for that question (its trace's total, from the decision log), so that front-end overhead
= reply - pipeline is measured in the same run. Prints medians and P95.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.chat.services import Services  # noqa: E402
from bot.settings import Settings  # noqa: E402
from bot.whatsapp.app import serving  # noqa: E402
from bot.whatsapp.settings import WhatsAppSettings  # noqa: E402
from standins.whatsapp import FakeGraph, encode, sign, text_message  # noqa: E402

SECRET = "bench-secret"
SAMPLE = ROOT.parent / "shared" / "data" / "msmarco-xi-sample" / "queries.jsonl"


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


async def ask(http: httpx.AsyncClient, graph: FakeGraph, n_before: int, text: str,
              wa_id: str) -> tuple[float, float]:
    body = encode(text_message(wa_id, text))
    start = time.perf_counter()
    response = await http.post("/webhook", content=body,
                               headers={"X-Hub-Signature-256": sign(body, SECRET)})
    ack_ms = (time.perf_counter() - start) * 1e3
    response.raise_for_status()
    while not any(s.body["to"] == wa_id for s in graph.delivered()[n_before:]):
        await asyncio.sleep(0.002)
    return ack_ms, (time.perf_counter() - start) * 1e3


async def run(n: int) -> dict:
    questions = [json.loads(line)["text"] for line in SAMPLE.open(encoding="utf-8")][:n]
    work = Path(tempfile.mkdtemp(prefix="bench-whatsapp-"))
    env = {"BOT_DB_PATH": str(work / "bot.sqlite3"), "BOT_RATE_LIMIT_N": "0",
           "BOT_REPEAT_WINDOW_S": "0"}
    settings = Settings.from_env({**os.environ, **env})
    services = await Services.open(settings)
    out: dict = {"n": n}
    try:
        async with FakeGraph() as graph:
            wa = WhatsAppSettings(token=graph.token, phone_number_id=graph.phone_number_id,
                                  app_secret=SECRET, verify_token="v", api_base=graph.url,
                                  api_version=graph.version, listen="127.0.0.1", port=0)
            async with serving(services, wa) as (_front, url), \
                    httpx.AsyncClient(base_url=url, timeout=120) as http:
                sequential = []
                for i, text in enumerate(questions):  # distinct senders: one reply each
                    sequential.append(await ask(http, graph, len(graph.delivered()), text,
                                                f"9198{i:08d}"))
                n_before = len(graph.delivered())
                burst = await asyncio.gather(*(
                    ask(http, graph, n_before, text, f"9197{i:08d}")
                    for i, text in enumerate(questions)))
        async with services.db._conn.execute(
                "SELECT total_ms FROM decisions ORDER BY id LIMIT ?", (n,)) as cursor:
            pipeline_ms = [row["total_ms"] for row in await cursor.fetchall()]
    finally:
        await services.close()
    for name, rows in (("sequential", sequential), ("burst", burst)):
        acks, replies = [r[0] for r in rows], [r[1] for r in rows]
        out[name] = {"ack_p50_ms": statistics.median(acks), "ack_p95_ms": pct(acks, 95),
                     "reply_p50_ms": statistics.median(replies),
                     "reply_p95_ms": pct(replies, 95)}
    overhead = [r[1] - p for r, p in zip(sequential, pipeline_ms, strict=True)]
    out["sequential"]["pipeline_p50_ms"] = statistics.median(pipeline_ms)
    out["sequential"]["overhead_p50_ms"] = statistics.median(overhead)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40, help="questions per phase")
    args = parser.parse_args()
    out = asyncio.run(run(args.n))
    seq, burst = out["sequential"], out["burst"]
    print(f"{out['n']} typed questions, one at a time: webhook 200 after {seq['ack_p50_ms']:.1f} "
          f"ms P50 ({seq['ack_p95_ms']:.1f} P95); reply after {seq['reply_p50_ms']:.1f} ms P50 "
          f"({seq['reply_p95_ms']:.1f} P95), of which the pipeline {seq['pipeline_p50_ms']:.1f} "
          f"ms P50; front end adds {seq['overhead_p50_ms']:.1f} ms P50")
    print(f"{out['n']} at once: webhook 200 after {burst['ack_p50_ms']:.1f} ms P50 "
          f"({burst['ack_p95_ms']:.1f} P95); reply after {burst['reply_p50_ms']:.1f} ms P50 "
          f"({burst['reply_p95_ms']:.1f} P95); ratio reply/ack P50 "
          f"{burst['reply_p50_ms'] / burst['ack_p50_ms']:.0f}x")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
