"""/start, /help, /why, /lang, /mode, /voice and notices (e.g. "unknown command") as framework-free
service functions.

Each takes the :class:`Services`, the :class:`Asker` and the command's argument (text after the
command, or None) and returns a :class:`Reply` of Telegram HTML. Each counts against the user's
rate limit like a question (see ``bot.questions.rate_limited_reply``): over it, the reply is
"please wait N s" once per window, then empty, and nothing is changed.
"""

from __future__ import annotations

import logging
from html import escape

from bot.messages import language_name, t
from bot.questions import rate_limited_reply
from bot.render import render_trace
from bot.services import Asker, Reply, Services, ui_language
from storage.db import CHAT_LANGS, MODES, VOICE_MODES, ChatSettings
from storage.inbox import decision_of_sent

log = logging.getLogger(__name__)


async def _command_context(services: Services, asker: Asker) -> tuple[ChatSettings, str,
                                                                      Reply | None]:
    """What every command starts with: the chat's stored settings, the language to reply in,
    and the rate limiter's notice when this message is over the limit (None when allowed; the
    call counts the message)."""
    chat = await services.db.get_chat_settings(asker.chat_id)
    ui = ui_language(chat.lang, asker)
    return chat, ui, rate_limited_reply(services, asker, ui)


async def help_reply(services: Services, asker: Asker) -> Reply:
    """The greeting and command list, in the chat's or the user's language."""
    _, ui, limited = await _command_context(services, asker)
    return limited if limited is not None else Reply([escape(t("help", ui))])


async def notice_reply(services: Services, asker: Asker, key: str, **args: object) -> Reply:
    """The message ``key`` of ``bot.messages`` (formatted with ``args``) in the chat's or the
    user's language, e.g. ``unknown_command`` with ``command="/foo"``."""
    _, ui, limited = await _command_context(services, asker)
    return limited if limited is not None else Reply([escape(t(key, ui, **args))])


async def why_reply(services: Services, asker: Asker, replied_to: int | None = None) -> Reply:
    """The full decision chain of the chat's last question, or of the answer the bot sent as
    message ``replied_to`` ("why?" as a reply to it), from the database, so it survives
    restarts: each stage's decision, detail and milliseconds, in that question's language."""
    _, ui, limited = await _command_context(services, asker)
    if limited is not None:
        return limited
    if replied_to is not None:
        stored = await decision_of_sent(services.db, asker.chat_id, replied_to)
        log.info("why_reply chat_id=%d replied_to=%d decision_id=%s", asker.chat_id, replied_to,
                 stored.id if stored else None)
        if stored is None:
            return Reply([escape(t("why_not_an_answer", ui))])
    else:
        stored = await services.db.last_decision(asker.chat_id)
    if stored is None:
        return Reply([escape(t("why_empty", ui))])
    result = stored.result
    return Reply(render_trace(result.trace, result.lang, query=result.query or stored.transcript))


async def lang_reply(services: Services, asker: Asker, arg: str | None) -> Reply:
    """``/lang en|hi|gu|te|auto`` stores the chat's language (``auto``: the language asked
    in); without a valid argument, the language in force and the usage line."""
    choice = (arg or "").strip().lower()
    chat, ui, limited = await _command_context(services, asker)
    if limited is not None:
        return limited
    if choice not in CHAT_LANGS:
        return Reply([escape(f"{lang_line(chat.lang, ui)}\n{t('lang_usage', ui)}")])
    chat = await services.db.set_chat_settings(asker.chat_id, lang=choice)
    log.info("chat_settings chat_id=%d lang=%s", asker.chat_id, choice)
    ui = ui_language(chat.lang, asker)
    if choice == "auto":
        return Reply([escape(t("lang_auto", ui))])
    return Reply([escape(t("lang_set", ui, language=language_name(choice, ui)))])


async def mode_reply(services: Services, asker: Asker, arg: str | None) -> Reply:
    """``/mode extractive|generative`` stores the chat's answer mode (choosing generative
    without ``OPENROUTER_API_KEY`` says that answers stay extractive); without a valid argument,
    the mode in force and the usage line."""
    choice = (arg or "").strip().lower()
    chat, ui, limited = await _command_context(services, asker)
    has_llm_key = bool(services.settings.openrouter.api_key)
    if limited is not None:
        return limited
    if choice not in MODES:
        current = mode_line(chat.mode, ui, has_llm_key=has_llm_key)
        return Reply([escape(f"{current}\n{t('mode_usage', ui)}")])
    await services.db.set_chat_settings(asker.chat_id, mode=choice)
    log.info("chat_settings chat_id=%d mode=%s", asker.chat_id, choice)
    text = t("mode_set", ui, mode=t(f"mode_{choice}", ui))
    if choice == "generative" and not has_llm_key:
        text += "\n" + t("mode_no_llm_key", ui)
    return Reply([escape(text)])


async def voice_command_reply(services: Services, asker: Asker, arg: str | None) -> Reply:
    """``/voice on|off|auto`` stores whether the chat's answers also come as a voice note
    (``auto``: only answers to voice notes); without a valid argument, the choice in force and
    the usage line. Without ``SARVAM_API_KEY`` the reply adds that answers stay text only."""
    choice = (arg or "").strip().lower()
    chat, ui, limited = await _command_context(services, asker)
    if limited is not None:
        return limited
    if choice not in VOICE_MODES:
        return Reply([escape(f"{voice_line(chat.voice, ui, services)}\n{t('voice_usage', ui)}")])
    await services.db.set_chat_settings(asker.chat_id, voice=choice)
    log.info("chat_settings chat_id=%d voice=%s", asker.chat_id, choice)
    return Reply([escape(voice_line(choice, ui, services))])


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
