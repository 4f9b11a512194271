"""The one entry point front ends call for an answer, in either mode (the bot, the console,
WhatsApp and ``python -m bot ask``).

- ``extractive``: :meth:`rag.pipeline.Pipeline.ask` (the selected sentences of the passages),
  run in ``executor`` off the event loop; generative mode's blocking steps run there too.
- ``generative``: :func:`rag.generative.ask_generative` with the ``generator`` (a chat model),
  falling back to the extractive answer when the generated one cannot be shown.

Either way the result is a :class:`rag.types.Result` and no exception escapes but
cancellation (unexpected failures give ``Status.ERROR``).

A message that came after a previous turn of a conversation (issue 44) is asked with
``after=`` (a :class:`rag.types.Turn`, or the earlier question's text), passed on to the
pipeline in either mode; ``after=None`` reads the message alone, as before.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor
from functools import partial
from typing import Literal

from rag.generative import ask_generative
from rag.pipeline import Pipeline
from rag.prompt import MAX_PASSAGES, Generator
from rag.types import Result, Turn

log = logging.getLogger(__name__)

Mode = Literal["extractive", "generative"]


class Answerer:
    """Answers questions from ``pipeline``, generatively when asked and a ``generator`` is
    given.

    Args:
        pipeline: retrieval, guards and extractive answers.
        generator: the chat model of generative mode; None: extractive only.
        max_passages: top retrieved passages put in a generative prompt (at least 1).
        executor: runs the blocking pipeline steps of either mode (the bot passes its
            ``BOT_PIPELINE_THREADS`` pool, so generative answers share the extractive cap);
            None: the event loop's default.
    """

    def __init__(self, pipeline: Pipeline, generator: Generator | None = None, *,
                 max_passages: int = MAX_PASSAGES, executor: Executor | None = None) -> None:
        self.pipeline = pipeline
        self.generator = generator
        self.max_passages = max_passages
        self.executor = executor

    async def ask(self, query: str, *, lang: str | None = None, hint_lang: str | None = None,
                  mode: Mode = "extractive", after: Turn | str | None = None) -> Result:
        """Answer ``query`` in ``mode`` (``lang``, ``hint_lang``: as :meth:`Pipeline.ask`).

        ``after`` is the previous turn of the conversation (a :class:`Turn`, or the earlier
        question's text): the pipeline decides whether ``query`` leans on it and how to search
        it (``Result.followup``); None reads ``query`` alone.

        Raises:
            ValueError: ``mode`` is neither mode, or ``generative`` without a generator.
        """
        if mode not in ("extractive", "generative"):
            raise ValueError(f"unknown answer mode {mode!r}: use extractive or generative")
        if mode == "generative":
            if self.generator is None:
                raise ValueError("generative mode needs a generator (a chat model client)")
            return await ask_generative(self.pipeline, self.generator, query, lang, hint_lang,
                                        max_passages=self.max_passages, executor=self.executor,
                                        after=after)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self.executor, partial(self.pipeline.ask, query, lang, hint_lang, after=after))
