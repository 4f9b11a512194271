"""The per-update step: what every command and question does before its own work, in one place.

Every message a command or question handles, on every channel, goes through :func:`run_update`
(commands through the :func:`per_update` decorator):

0. the channel's allow-list (:class:`bot.chat.policy.ChannelPolicy`): a stranger's message
   counts against the rate limit and gets "this bot is private" (in a private chat) only while
   the limit allows, else nothing; nothing else runs and nothing is stored;
1. the chat's stored settings (``/lang``, ``/mode``, ``/voice``) are read, once;
2. the language to reply in is chosen (:func:`bot.chat.types.ui_language`);
3. a reply that does not count against the rate limit is given when there is one (a question
   replayed from the inbox, the same question again: ``unmetered``);
4. the rate limit decides, once (:meth:`bot.chat.ratelimit.RateLimiter.acquire`): over it, the reply
   is "please wait N s" the first time, then nothing, and the work is not done;
5. the work runs, inside the front end's busy indicator (Telegram's "typing…"), which is thus
   shown exactly for the messages the rate limit let through.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Concatenate, ParamSpec

from bot.chat.messages import t
from bot.chat.render import Text
from bot.chat.services import Services
from bot.chat.types import Asker, Reply, ui_language
from storage.db import ChatSettings
from storage.ratelimit import RateDecision

log = logging.getLogger(__name__)

P = ParamSpec("P")

Busy = Callable[[], AbstractAsyncContextManager[object]]
"""Makes the front end's "working on it" indicator, shown while the block runs (Telegram:
``bot.telegram.outbox``); ``no_indicator`` for front ends without one."""


def no_indicator() -> AbstractAsyncContextManager[object]:
    """A :data:`Busy` that shows nothing (the console, WhatsApp, commands)."""
    return contextlib.nullcontext()


@dataclass(frozen=True, slots=True)
class UpdateContext:
    """What one update's work starts from: the ``services``, who asked (``asker``), the chat's
    stored settings (``chat``) and the language to reply in (``ui``: ``en``/``hi``/``gu``/
    ``te``), read once per update by :func:`load_context`."""

    services: Services
    asker: Asker
    chat: ChatSettings
    ui: str

    @property
    def chat_id(self) -> int:
        return self.asker.chat_id

    def say(self, key: str, **args: object) -> Reply:
        """The message ``key`` of ``bot.chat.messages`` (formatted with ``args``) in :attr:`ui`, as
        one message, e.g. ``say("unknown_command", command="/foo")``."""
        return Reply([Text.plain(t(key, self.ui, **args))], lang=self.ui)


async def load_context(services: Services, asker: Asker, *,
                       ui_hint: str | None = None) -> UpdateContext:
    """Steps 1 and 2: the chat's settings and the reply language; ``ui_hint`` (a corpus
    language, e.g. the script of a typed question) comes before the user's interface language
    when the chat chose none (see :func:`bot.chat.types.ui_language`)."""
    chat = await services.db.get_chat_settings(asker.channel, asker.chat_id)
    return UpdateContext(services, asker, chat, ui_language(chat.lang, asker, ui_hint))


async def run_update(services: Services, asker: Asker,
                     work: Callable[[UpdateContext], Awaitable[Reply]], *,
                     ui_hint: str | None = None,
                     unmetered: Callable[[UpdateContext], Awaitable[Reply | None]] | None = None,
                     busy: Busy = no_indicator) -> Reply:
    """The per-update step (see the module's docstring), then ``work``.

    Args:
        ui_hint: as in :func:`load_context`.
        unmetered: a reply that is not counted against the rate limit, or None to go on.
        busy: the indicator shown while ``work`` runs; never shown for a refused message.

    Returns:
        For a sender the channel's allow-list does not admit, :func:`stranger_reply`; else
        ``unmetered``'s reply; else, over the rate limit, the reply of :func:`limited_reply`;
        else ``work``'s reply.
    """
    if not services.policy(asker.channel).admits(asker.user_id):
        return await stranger_reply(services, asker)
    ctx = await load_context(services, asker, ui_hint=ui_hint)
    if unmetered is not None:
        reply = await unmetered(ctx)
        if reply is not None:
            return reply
    verdict = await acquire(ctx)
    if not verdict.is_allowed:
        return limited_reply(ctx, verdict)
    async with busy():
        return await work(ctx)


def per_update(work: Callable[Concatenate[UpdateContext, P], Awaitable[Reply]]
               ) -> Callable[Concatenate[Services, Asker, P], Awaitable[Reply]]:
    """Decorator for commands: ``work(ctx, *args)`` becomes ``command(services, asker, *args)``,
    run by :func:`run_update` (settings, language and rate limit first)."""

    @functools.wraps(work)
    async def command(services: Services, asker: Asker, /, *args: P.args,
                      **kwargs: P.kwargs) -> Reply:
        return await run_update(services, asker, lambda ctx: work(ctx, *args, **kwargs))

    return command


async def acquire(ctx: UpdateContext) -> RateDecision:
    """Step 4: count this message against its sender's limit (``Asker.sender_id``; a message
    without a sender, as in the console, is always allowed), in this process or across
    replicas (``services.state``: ``bot.chat.state``). Every refusal is logged
    (``rate_limited ... reply=notice|dropped``)."""
    verdict = await ctx.services.state.acquire(ctx.asker)
    if not verdict.is_allowed:
        log.info("rate_limited chat_id=%d sender_id=%d wait_s=%d reply=%s channel=%s",
                 ctx.chat_id, ctx.asker.sender_id, verdict.wait_s,
                 "notice" if verdict.is_notice else "dropped", ctx.asker.channel)
    return verdict


def limited_reply(ctx: UpdateContext, verdict: RateDecision) -> Reply:
    """The reply to a refused message: "please wait N s" in ``ctx.ui`` for a notice, else no
    message at all (dropped)."""
    if not verdict.is_notice:
        return Reply([])
    return ctx.say("rate_limited", seconds=verdict.wait_s)


async def stranger_reply(services: Services, asker: Asker) -> Reply:
    """Step 0, a sender not on the channel's allow-list: the message counts against the rate
    limit (a stranger cannot make the bot flood a chat or the channel's API); while allowed, a
    private chat is told "this bot is private" in the user's interface language, a group
    nothing. Logged either way (``not_allowed ... reply=refusal|dropped``)."""
    is_limited = not (await services.state.acquire(asker)).is_allowed
    is_told = asker.is_private and not is_limited
    log.warning("not_allowed channel=%s user_id=%s chat_id=%s reply=%s", asker.channel,
                asker.user_id, asker.chat_id, "refusal" if is_told else "dropped")
    if not is_told:
        return Reply([])
    lang = asker.interface_lang or "en"
    return Reply([Text.plain(t("not_allowed", lang))], lang=lang)
