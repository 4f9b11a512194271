"""Repeated questions: the same text from the same chat within ``BOT_REPEAT_WINDOW_S`` seconds is
answered once (a double tap, a client resending on a flaky connection, five impatient sends).
Only the chat's last question is repeated: once another question came in between, the same text
is a new question, since a short follow-up ("and a big one?") means something else after
another question (issue 44); ``/new`` and a ``/lang`` change forget the chat's window
(:meth:`RepeatFilter.forget_chat`).

In memory, per process, like ``bot.chat.ratelimit``: after a restart a repeat is answered again,
which is what a user who got no answer wants. Texts are compared as the pipeline reads them
(``rag.text.clean_query``), case-folded, ignoring punctuation and spacing.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from rag.text import clean_query, tokenize


@dataclass(frozen=True, slots=True)
class Repeat:
    """A message that repeats an earlier one: the first one's ``first_message_id`` (None in the
    console), how many seconds ago it came (``age_s``), and ``n_repeat``, 1 for the first
    repeat of it, 2 for the second..."""

    first_message_id: int | None
    age_s: float
    n_repeat: int


@dataclass(slots=True)
class _Seen:
    message_id: int | None
    at_s: float
    n_repeats: int = 0


@dataclass(slots=True)
class RepeatFilter:
    """Remembers each chat's questions for ``window_s`` seconds (0 turns the filter off).

    A chat is any hashable key: the chat layer passes ``(channel, chat id)``
    (``bot.chat.state.InProcessState``), so Telegram's chat 42 and WhatsApp's number 42 are two
    chats, as in the replicas' shared window (key ``"<channel>:<chat id>"``)."""

    window_s: float = 30.0
    _seen: dict[Hashable, dict[str, _Seen]] = field(default_factory=dict)

    def check(self, chat_id: Hashable, message_id: int | None, text: str, now_s: float
              ) -> Repeat | None:
        """None for a new question (remembered from now on, in place of the chat's earlier
        ones), else the :class:`Repeat` it is: the same text as the chat's last question.
        ``now_s`` is monotonic seconds. The same message seen again (an edit, a replay) is
        never its own repeat."""
        if self.window_s <= 0:
            return None
        chat = self._seen.setdefault(chat_id, {})
        for key in [k for k, seen in chat.items() if now_s - seen.at_s > self.window_s]:
            del chat[key]
        key = question_key(text)
        seen = chat.get(key)
        if seen is None or (message_id is not None and seen.message_id == message_id):
            chat.clear()  # a question in between: earlier texts are new questions again
            chat[key] = _Seen(message_id, now_s)
            return None
        seen.n_repeats += 1
        return Repeat(seen.message_id, now_s - seen.at_s, seen.n_repeats)

    def forget(self, chat_id: Hashable, text: str) -> None:
        """Let ``text`` be asked again at once (its answer failed: a retry deserves one)."""
        self._seen.get(chat_id, {}).pop(question_key(text), None)

    def forget_chat(self, chat_id: Hashable) -> None:
        """Forget every question of the chat (``/new``: the next message is new whatever it
        says)."""
        self._seen.pop(chat_id, None)


def question_key(text: str) -> str:
    """What two questions must share to be the same: their words, case-folded
    (``"What is X?"`` and ``"what is x"`` match); the cleaned text when it has no words."""
    cleaned = clean_query(text)
    return " ".join(tokenize(cleaned)) or cleaned
