"""A chat's conversation context (issue 44): the last turn a follow-up ("and a big one?",
"aur xbox one ki?") is read with, when it is used, and when it ends. Channel-free.

The context is one row per ``(channel, chat_id)`` in the database
(:class:`storage.db.ChatContext`), so replicas share it and a restart keeps it: the last
question as it was searched, its language, the passages its reply cited, the answer shown,
when, and how many follow-ups in a row it has carried. A question typed or spoken:

1. reads it (:func:`current`): none, or one past :data:`CONTEXT_TTL_S` or that already carried
   :data:`MAX_FOLLOWUPS` follow-ups, means the message is read alone;
2. passes it to the pipeline as ``after`` (``rag.answering.Answerer.ask``), which decides
   whether the message leans on it (``Result.followup``);
3. stores the new turn (:func:`remember`): an answered question, and a refused one too (with
   no passages), so "and in Hindi?" after a refusal is still read with what was asked. A
   message refused as bad input ("??", an empty transcript) and an error leave the context as
   it was: neither is a topic, and a retry should be read like the first try.

It ends on ``/new``, on a ``/lang`` change (:func:`forget`, which also empties the chat's repeat
window: the same words typed again then are a new question, read on their own or in the new
language, not "my answer is above"), after :data:`CONTEXT_TTL_S`, and after
:data:`MAX_FOLLOWUPS` follow-ups in a row. Every look at a stored context is one log line
(``context channel=... chat_id=... live=no why=expired age_s=... n_followups=...``; ``why`` is
``fresh``, ``expired`` or ``spent``), every end one more (``context_cleared ... why=new``).
"""

from __future__ import annotations

import logging

from bot.chat.services import Services
from bot.chat.types import Asker
from rag.followup import turn_after
from rag.types import Result, Status
from storage.db import ChatContext

log = logging.getLogger(__name__)

CONTEXT_TTL_S = 15 * 60
"""Seconds after the last turn during which a message may still be read as its follow-up. A
chat's follow-ups come within a minute or two of the answer they lean on; a quarter of an hour
later the user has usually moved on, and reading "and the price?" then against an old topic
would answer a question nobody asked. A chosen bound, not fitted: issue 44 suggested 15
minutes."""

MAX_FOLLOWUPS = 3
"""Follow-ups in a row a context carries: the 4th message after a full question is read alone
(and, read alone, starts the count again). Each follow-up's search is built on the one before
("and a big one?" → "and the price?" → ...), so every step drifts further from anything the
user actually typed; three keeps the usual "and …? and …?" exchanges and stops a long chain
of short messages from being read against a question from minutes of drift ago. A chosen
bound, not fitted (issue 44's suggestion)."""

_KEPT_UNCHANGED = frozenset({Status.REFUSED_BAD_INPUT, Status.ERROR})
"""Outcomes that leave the context as it was (see the module's docstring)."""


async def current(services: Services, asker: Asker) -> ChatContext | None:
    """The chat's context a new message may lean on, or None: there is none, it is older than
    :data:`CONTEXT_TTL_S` (by ``services.wall_clock``) or has carried :data:`MAX_FOLLOWUPS`
    follow-ups already. Logged when one exists (``context ... live=yes|no why=...``)."""
    context = await services.db.get_chat_context(asker.channel, asker.chat_id)
    if context is None:
        return None
    age_s = services.wall_clock() - context.at_s
    if age_s > CONTEXT_TTL_S:
        why = "expired"
    elif context.n_followups >= MAX_FOLLOWUPS:
        why = "spent"
    else:
        why = "fresh"
    log.info("context channel=%s chat_id=%d live=%s why=%s age_s=%.0f n_followups=%d",
             asker.channel, asker.chat_id, "yes" if why == "fresh" else "no", why, age_s,
             context.n_followups)
    return context if why == "fresh" else None


async def remember(services: Services, asker: Asker, result: Result,
                   used: ChatContext | None) -> ChatContext | None:
    """Store the turn ``result`` makes as the chat's context, replacing the one before, and
    return it; ``used`` is the context the message was read with (None: read alone). A
    follow-up (``result.followup.is_followup``) counts one more than ``used``, anything else
    starts at 0. A bad-input refusal or an error stores nothing (returns None)."""
    if result.status in _KEPT_UNCHANGED:
        return None
    is_followup = used is not None and result.followup is not None \
        and result.followup.is_followup
    turn = turn_after(result)
    context = ChatContext(
        asker.channel, asker.chat_id, turn.question, turn.lang, turn.passage_ids, turn.answer,
        services.wall_clock(), used.n_followups + 1 if is_followup else 0)
    await services.db.set_chat_context(context)
    return context


async def forget(services: Services, asker: Asker, why: str) -> bool:
    """End the chat's conversation (``why``: ``new``, ``lang``, for the log line): its context
    and its repeat window (``ChatState.forget_repeats``); True when there was a context."""
    had_one = await services.db.clear_chat_context(asker.channel, asker.chat_id)
    await services.state.forget_repeats(asker)
    log.info("context_cleared channel=%s chat_id=%d why=%s had_one=%s", asker.channel,
             asker.chat_id, why, "yes" if had_one else "no")
    return had_one
