"""/start, /help, /why, /new, /lang, /mode, /voice and notices (e.g. "unknown command") as
channel-free service functions, and the one parser of commands typed as text
(:func:`parse_command`).

Each is called as ``command(services, asker, *args)`` with the :class:`Services`, the
:class:`Asker` and the command's argument (text after the command, or None) and returns a
:class:`Reply`. Each goes through the per-update step
(``bot.chat.context.per_update``), so it counts against the user's rate limit like a question:
over it, the reply is "please wait N s" once per window, then empty, and nothing is changed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bot.chat import conversation
from bot.chat.context import UpdateContext, per_update
from bot.chat.messages import language_name, t
from bot.chat.render import Text, render_trace
from bot.chat.services import Services
from bot.chat.types import Asker, Reply, ui_language
from storage.db import CHAT_LANGS, MODES, VOICE_MODES
from storage.inbox import decision_of_sent

log = logging.getLogger(__name__)

BARE_COMMANDS = frozenset({"why", "help", "start", "new"})
"""Commands recognised as a whole message without a slash (``why``, ``why?``, ``new``), where
the channel has no command menu (WhatsApp)."""
BARE_ARGUMENT_COMMANDS = frozenset({"lang", "mode", "voice"})
"""Commands recognised without a slash when followed by at most one word (``lang hi``)."""
COMMAND_CHARS = 32
"""Longest command echoed back or logged, in characters ("/" included) before an ellipsis:
Telegram's own commands are at most 32 characters, so only junk is cut."""


@dataclass(frozen=True, slots=True)
class Command:
    """A command typed as text: ``name`` without slash or ``@bot``, lower case; ``arg`` the text
    after it (None when there is none); ``typed`` the command as typed, for "unknown command"
    (cut to ``COMMAND_CHARS``)."""

    name: str
    arg: str | None
    typed: str


def parse_command(text: str, *, bare_words: bool = False) -> Command | None:
    """The command ``text`` is, else None (a question).

    ``/name[@bot] [arg]`` always is one (tabs count as spaces; ``@bot`` is dropped: the front end
    decides first whether the message is addressed to the bot). With ``bare_words`` (channels
    without a command menu) also ``why``, ``help``, ``start`` alone (a final ``?``/``!``/``.``
    allowed), ``new`` alone, and ``lang``/``mode``/``voice`` with at most one word after:
    ``why is the sky blue`` stays a question.
    """
    words = text.split()
    if not words:
        return None
    first, arg = words[0], " ".join(words[1:]) or None
    if first.startswith("/") and len(first) > 1:
        typed = first.partition("@")[0]
        return Command(typed[1:].lower(), arg, cut_command(typed))
    if not bare_words:
        return None
    name = first.lower().rstrip("?!.")
    if (name in BARE_COMMANDS and len(words) == 1) or \
            (name in BARE_ARGUMENT_COMMANDS and len(words) <= 2):
        return Command(name, arg, cut_command("/" + name))
    return None


def cut_command(command: str) -> str:
    """``command`` as echoed back or logged: at most ``COMMAND_CHARS`` characters plus "…"."""
    return command[:COMMAND_CHARS] + "…" if len(command) > COMMAND_CHARS else command


async def answer_command(services: Services, asker: Asker, command: Command) -> Reply:
    """The reply to ``command``: its own (:func:`command_reply`), or "unknown command"."""
    reply = await command_reply(services, asker, command.name, command.arg)
    if reply is not None:
        return reply
    log.info("unsupported_message channel=%s chat_id=%d kind=command command=%s",
             asker.channel, asker.chat_id, command.typed)
    return await notice_reply(services, asker, "unknown_command", command=command.typed)


@per_update
async def help_reply(ctx: UpdateContext) -> Reply:
    """The greeting and command list, in the chat's or the user's language."""
    return ctx.say("help")


@per_update
async def notice_reply(ctx: UpdateContext, key: str, **args: object) -> Reply:
    """The message ``key`` of ``bot.chat.messages`` (formatted with ``args``) in the chat's or the
    user's language, e.g. ``unknown_command`` with ``command="/foo"``."""
    return ctx.say(key, **args)


@per_update
async def why_reply(ctx: UpdateContext, replied_to: int | None = None) -> Reply:
    """The full decision chain of the chat's last question, or of the answer the bot sent as
    message ``replied_to`` ("why?" as a reply to it), from the database, so it survives
    restarts: each stage's decision, detail and milliseconds, in that question's language."""
    db = ctx.services.db
    if replied_to is not None:
        stored = await decision_of_sent(db, ctx.asker.channel, ctx.chat_id, replied_to)
        log.info("why_reply chat_id=%d replied_to=%d decision_id=%s", ctx.chat_id, replied_to,
                 stored.id if stored else None)
        if stored is None:
            return ctx.say("why_not_an_answer")
    else:
        stored = await db.last_decision(ctx.asker.channel, ctx.chat_id)
    if stored is None:
        return ctx.say("why_empty")
    result = stored.result
    return Reply([render_trace(result.trace, result.lang,
                               query=result.query or stored.transcript,
                               followup=result.followup)], lang=result.lang)


@per_update
async def new_reply(ctx: UpdateContext) -> Reply:
    """``/new``: end the chat's conversation context (``bot.chat.conversation``), so the next
    message is read on its own, not as a follow-up of the last question; said the same way
    whether there was one."""
    await conversation.forget(ctx.services, ctx.asker, "new")
    return ctx.say("new_conversation")


@per_update
async def lang_reply(ctx: UpdateContext, arg: str | None) -> Reply:
    """``/lang en|hi|gu|te|auto`` stores the chat's language (``auto``: the language asked
    in); without a valid argument, the language in force and the usage line. A change of
    language ends the chat's conversation context (``bot.chat.conversation``): the next message
    is read on its own, not as a follow-up of a question asked in the other language."""
    choice, ui = (arg or "").strip().lower(), ctx.ui
    if choice not in CHAT_LANGS:
        usage = f"{lang_line(ctx.chat.lang, ui)}\n{t('lang_usage', ui)}"
        return Reply([Text.plain(usage)], lang=ui)
    chat = await ctx.services.db.set_chat_settings(ctx.asker.channel, ctx.chat_id, lang=choice)
    log.info("chat_settings chat_id=%d lang=%s", ctx.chat_id, choice)
    if choice != ctx.chat.lang:
        await conversation.forget(ctx.services, ctx.asker, "lang")
    ui = ui_language(chat.lang, ctx.asker)  # the new choice speaks already
    if choice == "auto":
        return Reply([Text.plain(t("lang_auto", ui))], lang=ui)
    return Reply([Text.plain(t("lang_set", ui, language=language_name(choice, ui)))], lang=ui)


@per_update
async def mode_reply(ctx: UpdateContext, arg: str | None) -> Reply:
    """``/mode extractive|generative`` stores the chat's answer mode (choosing generative
    without ``OPENROUTER_API_KEY`` says that answers stay extractive); without a valid argument,
    the mode in force and the usage line."""
    choice, ui = (arg or "").strip().lower(), ctx.ui
    has_llm_key = bool(ctx.services.settings.openrouter.api_key)
    if choice not in MODES:
        current = mode_line(ctx.chat.mode, ui, has_llm_key=has_llm_key)
        return Reply([Text.plain(f"{current}\n{t('mode_usage', ui)}")], lang=ui)
    await ctx.services.db.set_chat_settings(ctx.asker.channel, ctx.chat_id, mode=choice)
    log.info("chat_settings chat_id=%d mode=%s", ctx.chat_id, choice)
    text = t("mode_set", ui, mode=t(f"mode_{choice}", ui))
    if choice == "generative" and not has_llm_key:
        text += "\n" + t("mode_no_llm_key", ui)
    return Reply([Text.plain(text)], lang=ui)


@per_update
async def voice_command_reply(ctx: UpdateContext, arg: str | None) -> Reply:
    """``/voice on|off|auto`` stores whether the chat's answers also come as a voice note
    (``auto``: only answers to voice notes); without a valid argument, the choice in force and
    the usage line. Without ``SARVAM_API_KEY`` the reply adds that answers stay text only."""
    choice, ui, services = (arg or "").strip().lower(), ctx.ui, ctx.services
    if choice not in VOICE_MODES:
        current = voice_line(ctx.chat.voice, ui, services)
        return Reply([Text.plain(f"{current}\n{t('voice_usage', ui)}")], lang=ui)
    await services.db.set_chat_settings(ctx.asker.channel, ctx.chat_id, voice=choice)
    log.info("chat_settings chat_id=%d voice=%s", ctx.chat_id, choice)
    return Reply([Text.plain(voice_line(choice, ui, services))], lang=ui)


async def command_reply(services: Services, asker: Asker, name: str,
                        arg: str | None) -> Reply | None:
    """The reply to the text command ``/name arg`` (``name`` without the slash, lower case;
    ``arg`` None or blank when there is none); None when ``name`` is not a command here."""
    arg = arg or None
    match name:
        case "start" | "help":
            return await help_reply(services, asker)
        case "why":
            return await why_reply(services, asker)
        case "new":
            return await new_reply(services, asker)
        case "lang":
            return await lang_reply(services, asker, arg)
        case "mode":
            return await mode_reply(services, asker, arg)
        case "voice":
            return await voice_command_reply(services, asker, arg)
    return None


def voice_line(voice: str, ui: str, services: Services) -> str:
    """The spoken-reply choice in force, in ``ui``: ``voice`` is one of ``VOICE_MODES``; a
    choice that would speak adds that it cannot without a Sarvam key."""
    line = t(f"voice_{voice}", ui)
    if voice != "off" and not services.settings.sarvam.api_key:
        line += "\n" + t("voice_no_key", ui)
    return line


def lang_line(lang: str, ui: str) -> str:
    """The answer language in force, in ``ui``: ``lang`` is one of ``CHAT_LANGS``."""
    if lang == "auto":
        return t("lang_auto", ui)
    return t("lang_current", ui, language=language_name(lang, ui))


def mode_line(mode: str, ui: str, *, has_llm_key: bool = True) -> str:
    """The answer mode in force, in ``ui``: ``mode`` is one of ``MODES``. Generative mode
    without an OpenRouter key (``has_llm_key`` False) adds that answers stay extractive."""
    line = t("mode_current", ui, mode=t(f"mode_{mode}", ui))
    if mode == "generative" and not has_llm_key:
        line += "\n" + t("mode_no_llm_key", ui)
    return line
