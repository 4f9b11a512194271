"""Follow-up questions (issue 44): a message read with the conversation's previous turn.

People in a chat do not repeat themselves: after "how many calories in a small cucumber?" they
ask "and a large one?". Read alone, such a message has no topic of its own: it falls below the
floor, or lands on an unrelated passage. So when the chat layer passes the previous turn
(:class:`rag.types.Turn`: the earlier question as it was searched, its language and the
passages it cited), the pipeline searches the message twice, alone and with the previous
question (:func:`search_text`), and reads it with the context (:func:`leans_on`) when

- read alone it clears no floor, or its best passage is on the previous question's topic
  (what a message with a topic of its own does not do: a complete new question lands on its
  own topic), or
- it carries a word that points back (:data:`MARKERS`: "it", "that one", "और", "इसका",
  "aur", "એનું", "దాని") and, with the context, its best passage is on the previous topic
  while read alone it clears the floor by less than :data:`MARGIN_WITH_MARKER`.

Read with the context, the message is searched as the previous question followed by it, which
finds the previous topic's passages, and its answer is chosen for the message with the previous
question's topic words (:func:`reading_text`: the words of the previous question rarer than
:data:`TOPIC_IDF` in the corpus, "cucumber" and "Invisalign", not "calories" or "how long"),
so the sentence chosen answers what is asked now, not what was asked before. The floors, gate,
hedging and guards are the same as for any question. The thresholds were chosen on the
training pairs (``eval/followups/train_*``, ``scripts/fit_followups.py``); what they give:
docs/benchmarks.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

import numpy as np

from rag.romanized import to_devanagari
from rag.text import content_tokens, tokenize, undecorated
from rag.types import FollowUpReading, Hit, Result, Turn

MARKERS: dict[str, frozenset[str]] = {
    "en": frozenset(
        "it its itself that this these those they them their there one ones he she his her "
        "him same else also too and about".split()),
    "hi": frozenset(
        "इसका इसकी इसके इसे इसमें इससे इसको उसका उसकी उसके उसे उसमें उससे उसको ये यह वो वह "
        "इनका इनकी इनके इन्हें इनमें उनका उनकी उनके उन्हें उनमें वहां वहाँ वहीं यहां यहाँ भी और "
        "वाला वाली वाले फिर तो".split()),
    "gu": frozenset(
        "તેનું તેની તેના તેને તેમાં તેનો એનું એની એના એને એમાં એનો તે એ આ તેઓ તેમનું ત્યાં અહીં "
        "પણ અને તો".split()),
    "te": frozenset(
        "దాని దీని దానికి దీనికి దాన్ని దీన్ని అది ఇది అవి ఇవి వాటి వీటి ఆ ఈ అక్కడ ఇక్కడ అతని "
        "ఆమె మరి మరియు కూడా అంటే".split()),
}
"""Words a follow-up points back with, per language (as ``rag.text.tokenize`` gives them):
pronouns and demonstratives, "and", "also", "what about"; Hindi typed in Latin letters is
compared in the Devanagari it spells ("aur iska" -> "और इसका")."""

MARGIN_WITH_MARKER = 0.03
"""A message with a :data:`MARKERS` word is still read alone when, alone, its top cosine is at
least this far above its language's floor (a complete question that starts "okay and …" has a
topic of its own). Chosen on the training pairs by ``scripts/fit_followups.py``."""

MAX_BARE_WORDS = 3
"""A message of at most this many content words ("and a large one?": large) leans on the
previous turn like one with a :data:`MARKERS` word."""

TOPIC_IDF = 5.0
"""A word of the previous question joins the follow-up's reading (:func:`reading_text`) when
its IDF in the question's language (``rag.selection.Idf``: ln((N + 1) / (df + 0.5))) is at least
this: the thing talked about, not what was asked of it. Chosen on the training pairs by
``scripts/fit_followups.py`` (its grid 3, 4, 5 and 99 against the margins 0, 0.03 and 0.06: 5.0
with :data:`MARGIN_WITH_MARKER` 0.03; ``docs/benchmarks.md``, "Follow-up questions")."""


COMBINE = "sum"
"""How the search with the context gets its vector: ``sum`` of the previous question's and the
message's (:func:`combined_vector`; no encoder call: the previous question's vector is kept
from when it was asked) or ``concat``, the two texts embedded together (one encoder call)."""


def combined_vector(previous: np.ndarray, message: np.ndarray) -> np.ndarray:
    """float32 (dim,): the L2-normalised sum of two L2-normalised float32 (dim,) vectors, the
    direction between the previous question and the message."""
    total = np.asarray(previous, dtype=np.float32) + np.asarray(message, dtype=np.float32)
    norm = float(np.linalg.norm(total))
    return total / norm if norm > 0 else np.asarray(message, dtype=np.float32)


def turn_after(result: Result) -> Turn:
    """The turn ``result`` leaves for a follow-up, as the chat layer keeps it
    (``bot.chat.conversation.remember``): the question as searched, its language, and, where an
    answer was shown (confident or hedged), the passages it cited and its text."""
    shown = result.shows_answer
    return Turn(result.searched or result.query, result.lang,
                tuple(c.passage_id for c in result.citations) if shown else (),
                result.answer if shown else "")


def previous_turn(after: Turn | str) -> Turn:
    """``after`` as a :class:`Turn` (a bare string is the earlier question's text), its question
    read without decorations (:func:`rag.text.undecorated`), as it was searched and embedded
    when it was asked."""
    turn = after if isinstance(after, Turn) else Turn(str(after))
    return replace(turn, question=undecorated(turn.question))


def search_text(previous: Turn, message: str) -> str:
    """What a follow-up is searched as: the previous question, then the message."""
    return f"{previous.question} {message}".strip()


def reading_text(previous: Turn, message: str, lang: str, idf: Callable[[str, str], float],
                 min_idf: float | None = None) -> str:
    """What a follow-up's answer is chosen for: the message, then the previous question's words
    whose IDF in ``lang`` is at least ``min_idf`` (default :data:`TOPIC_IDF`) and that the
    message lacks (its topic)."""
    min_idf = TOPIC_IDF if min_idf is None else min_idf
    own = set(tokenize(message))
    topic = [w for w in dict.fromkeys(content_tokens(previous.question, lang))
             if w not in own and idf(lang, w) >= min_idf]
    return " ".join([message, *topic]).strip()


def has_marker(message: str, lang: str) -> bool:
    """The message has a word that points back (:data:`MARKERS`), in its script or, for Hindi
    typed in Latin letters, in the Devanagari it spells."""
    markers = MARKERS.get(lang, frozenset())
    words = set(tokenize(message))
    if lang == "hi":
        words |= set(tokenize(to_devanagari(message)))
    return bool(words & markers)


def topics_of(passage_ids: Iterable[str]) -> set[str]:
    """The topics (MS MARCO query ids, the middle of ``lang-query-index``) of passage ids."""
    return {pid.split("-")[1] for pid in passage_ids if pid.count("-") >= 2}


def leans_on(message: str, lang: str, previous_topics: set[str], alone_top: float | None,
             alone_hits: list[Hit], with_hits: list[Hit], floor: float,
             margin: float | None = None) -> tuple[bool, str]:
    """Whether ``message`` leans on the previous turn (see the module), and why (one line).

    ``previous_topics`` the previous turn's topics (:func:`topics_of` of the passages it cited,
    or of its search's top hits); ``alone_top`` the message's dense top cosine read alone (None:
    nothing found), ``alone_hits`` and ``with_hits`` its hits alone and with the context (best
    first); ``floor`` its language's; ``margin`` default :data:`MARGIN_WITH_MARKER`."""
    margin = MARGIN_WITH_MARKER if margin is None else margin
    alone_topic = topics_of([alone_hits[0].passage.id]) if alone_hits else set()
    with_topic = topics_of([with_hits[0].passage.id]) if with_hits else set()
    if not with_topic & previous_topics:
        return False, "with the context, its best passage is not on the previous topic"
    if alone_topic & previous_topics:
        return True, "alone, its best passage is on the previous topic"
    points_back = has_marker(message, lang) or \
        len(content_tokens(message, lang)) <= MAX_BARE_WORDS
    if alone_top is None or alone_top < floor:
        if points_back:
            return True, f"alone below the floor ({_score(alone_top)} < {floor:.3f})"
        return False, "a complete question of its own (below the floor alone)"
    if points_back and alone_top < floor + margin:
        return True, (f"points back, and alone clears the floor by less than {margin:.3f} "
                      f"({alone_top:.3f})")
    return False, f"a topic of its own (alone {alone_top:.3f} >= floor {floor:.3f})"


def reading(is_followup: bool, searched: str, detail: str) -> FollowUpReading:
    """The :class:`FollowUpReading` the result carries."""
    return FollowUpReading(is_followup, searched if is_followup else "", detail)


def _score(value: float | None) -> str:
    return "nothing found" if value is None else f"{value:.3f}"
