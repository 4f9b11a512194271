"""Replies to the bot's own answers that are not new questions: "why?" (show how that answer
was decided) and requests to go on ("tell me more", "और बताओ", "ok thanks"), which get a notice
instead of a search (an answer cannot be continued; a short question on its topic, such as "and
a big one?", is a question and is read with the previous one: ``bot.chat.conversation``).

Pure: text in, a kind out. Words are compared as ``rag.text.tokenize`` gives them (lower case,
punctuation dropped, Indic words whole).
"""

from __future__ import annotations

from typing import Literal

from rag.text import tokenize

WHY_PHRASES: frozenset[str] = frozenset({
    "why", "why so", "why not", "but why", "how come", "explain why", "how did you decide",
    "why this answer", "why that answer",
    "क्यों", "ऐसा क्यों", "क्यों नहीं", "पर क्यों", "लेकिन क्यों", "ये क्यों", "यह क्यों",
    "कैसे तय किया",
    "કેમ", "શા માટે", "કેમ નહીં", "પણ કેમ", "આવું કેમ",
    "ఎందుకు", "ఎందుకు కాదు", "కానీ ఎందుకు", "ఇది ఎందుకు",
})
"""Whole replies that ask why, in en/hi/gu/te (as ``tokenize`` words joined by spaces)."""

FOLLOW_UP_WORDS: frozenset[str] = frozenset(
    "more tell me us details detail explain elaborate continue go on and ok okay thanks thank "
    "you please again so what else anything further further expand yes no sure cool nice hmm "
    "और बताओ बताइए बताएं बताइये ज़्यादा ज्यादा विस्तार से समझाओ समझाइए आगे ठीक है धन्यवाद "
    "शुक्रिया हाँ हां नहीं अच्छा कुछ भी "
    "વધુ કહો કહેશો જણાવો સમજાવો આગળ બરાબર આભાર હા ના સારું બીજું પણ "
    "మరింత చెప్పు చెప్పండి వివరించు వివరించండి ఇంకా సరే ధన్యవాదాలు అవును కాదు బాగుంది".split()
)
"""Words a request to go on is made of: asking for more, thanking, agreeing (en/hi/gu/te). A
message with any other word ("and a big one?") is a question."""

MAX_FOLLOW_UP_WORDS = 4
"""A request to go on has at most this many words ("tell me more please"); longer is a
question."""


def reply_kind(text: str) -> Literal["why", "follow_up"] | None:
    """``"why"`` for a reply asking why, ``"follow_up"`` for a short message made only of
    :data:`FOLLOW_UP_WORDS` (a request to go on), else None (treat it as a question)."""
    words = tokenize(text)
    if not words:
        return None
    if " ".join(words) in WHY_PHRASES:
        return "why"
    if len(words) <= MAX_FOLLOW_UP_WORDS and all(w in FOLLOW_UP_WORDS for w in words):
        return "follow_up"
    return None
