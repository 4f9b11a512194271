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
import inspect
import logging
from collections.abc import Callable
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
        self.reads_followups = {"extractive": takes_after(pipeline.ask),
                                "generative": takes_after(pipeline.prepare)}
        """Per mode, whether the pipeline reads a message with its previous turn (``after=``
        of :meth:`Pipeline.ask`, and of :meth:`Pipeline.prepare` for generative mode). The
        follow-up reading comes with the pipeline of issue 44; until a pipeline has it,
        ``after`` is dropped here (logged once) and the message is read alone, as before."""
        self._is_drop_logged = False

    async def ask(self, query: str, *, lang: str | None = None, hint_lang: str | None = None,
                  mode: Mode = "extractive", after: Turn | str | None = None) -> Result:
        """Answer ``query`` in ``mode`` (``lang``, ``hint_lang``: as :meth:`Pipeline.ask`).

        ``after`` is the previous turn of the conversation (a :class:`Turn`, or the earlier
        question's text): the pipeline decides whether ``query`` leans on it and how to search
        it (``Result.followup``); None reads ``query`` alone.

        Raises:
            ValueError: ``mode`` is neither mode, or ``generative`` without a generator.
        """
        if mode not in self.reads_followups:
            raise ValueError(f"unknown answer mode {mode!r}: use extractive or generative")
        if after is not None and not self.reads_followups[mode]:
            self._log_dropped(mode)
            after = None
        with_after = {} if after is None else {"after": after}
        if mode == "generative":
            if self.generator is None:
                raise ValueError("generative mode needs a generator (a chat model client)")
            return await ask_generative(self.pipeline, self.generator, query, lang, hint_lang,
                                        max_passages=self.max_passages, executor=self.executor,
                                        **with_after)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self.executor, partial(self.pipeline.ask, query, lang, hint_lang, **with_after))

    def _log_dropped(self, mode: str) -> None:
        if not self._is_drop_logged:
            self._is_drop_logged = True
            log.warning("followup_unread mode=%s pipeline=%s: this pipeline has no follow-up "
                        "reading (after=); messages are read alone", mode,
                        type(self.pipeline).__name__)


def takes_after(method: Callable[..., object]) -> bool:
    """Whether ``method`` accepts an ``after`` argument (the follow-up reading of issue 44)."""
    try:
        return "after" in inspect.signature(method).parameters
    except (TypeError, ValueError):  # no signature to read (a builtin, a C extension)
        return False
