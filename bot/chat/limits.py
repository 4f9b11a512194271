"""How large a reply may be, on every channel: a bound on an answer's text and on a spoken
reply's length, applied once here before any front end sees the reply.

An answer longer than ``MAX_ANSWER_CHARS`` (a generated one: the model is asked for one to three
short sentences, but nothing stops it writing 6,000 characters, one sentence 40 times) is
*cut, not refused*: sentences repeated word for word are dropped, then the answer ends at the
last sentence end within the limit. The trace gets an ``answer_bound`` stage saying so, with
the numbers (``/why``: ``answer_bound — cut: 5999 chars -> 148 chars: 39 repeated sentences
dropped, cut at a sentence end (max 1000)``). A spoken reply says at most
``MAX_SPEECH_CHARS`` characters (cut the same way), and its audio is trimmed to
``MAX_VOICE_REPLY_S`` seconds when encoded, whatever the text (``bot.chat.voice_reply``).
"""

from __future__ import annotations

import re

from rag.types import Result, Stage

MAX_ANSWER_CHARS = 1000
"""Longest answer text, in characters. Extractive answers are at most 300 (``rag.selection``);
the generative prompt asks for one to three short sentences (``rag.prompt``), about 150-450
characters; 1,000 leaves room for three long sentences in any of the four languages, and keeps
the whole reply (with the cited passages) in one Telegram or WhatsApp message."""
MAX_VOICE_REPLY_S = 60.0
"""Longest spoken reply, in seconds: an answer of ``MAX_ANSWER_CHARS`` at Bulbul's pace fits;
without a bound a 5,999-character answer was spoken as a 519 s voice note."""
SPEECH_CHARS_PER_S = 11.5
"""Characters Bulbul speaks per second, from that note: 5,999 characters in 519 s."""
MAX_SPEECH_CHARS = int(MAX_VOICE_REPLY_S * SPEECH_CHARS_PER_S)
"""Longest text sent to text-to-speech (690 characters, ~60 s)."""

ANSWER_BOUND_STAGE = "answer_bound"
"""Trace stage :func:`bound_answer` adds when it cut an answer: the reply says it was shortened
(``bot.chat.render``), ``/why`` by how much."""

_SENTENCE_END_RE = re.compile(r"(?<=[.!?।॥])\s+")


def bound_text(text: str, max_chars: int) -> tuple[str, int]:
    """``text`` without sentences repeated word for word, then cut at the last sentence end
    within ``max_chars`` (at the last space when the first sentence alone is longer, with an
    ellipsis). Returns the text and the number of repeated sentences dropped."""
    sentences, seen, n_repeated = [], set(), 0
    for sentence in _SENTENCE_END_RE.split(" ".join(text.split())):
        key = sentence.casefold()
        if key in seen:
            n_repeated += 1
            continue
        seen.add(key)
        sentences.append(sentence)
    kept: list[str] = []
    for sentence in sentences:
        if len(" ".join([*kept, sentence])) > max_chars:
            break
        kept.append(sentence)
    if not kept and sentences:
        cut = sentences[0][: max_chars - 1]
        space = cut.rfind(" ")
        return (cut[:space] if space > max_chars // 2 else cut).rstrip(" ,;:") + "…", n_repeated
    return " ".join(kept), n_repeated


def bound_answer(result: Result, max_chars: int = MAX_ANSWER_CHARS) -> Result:
    """``result`` with its answer bounded to ``max_chars`` (see the module docstring) and an
    ``answer_bound`` stage in its trace when anything was cut; unchanged otherwise."""
    if not result.shows_answer or len(result.answer) <= max_chars:
        return result
    n_before = len(result.answer)
    result.answer, n_repeated = bound_text(result.answer, max_chars)
    detail = f"{n_before} chars -> {len(result.answer)} chars: "
    if n_repeated:
        detail += f"{n_repeated} repeated sentences dropped, "
    detail += f"cut at a sentence end (max {max_chars})"
    result.trace.stages.append(Stage(ANSWER_BOUND_STAGE, "cut", detail, 0.0))
    return result
