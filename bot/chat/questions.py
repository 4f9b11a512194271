"""Questions, typed or spoken: the per-update step (settings, language, rate limit:
``bot.chat.context``) → (voice: size/length checks → download → transcode → speech-to-text) →
the chat's conversation context (``bot.chat.conversation``) → pipeline → bound the answer
(``bot.chat.limits``) → record the decision → store the new context → render. Channel-free
service functions every front end calls; :func:`reply_to_text` is the one entry for typed text
(a command, "why?" or "tell me more" in reply to an answer, or a question).

Every question that reaches a decision is committed to the database before the reply is built,
including voice notes refused before the pipeline (too big, not downloadable, unreadable, no
speech) and speech-to-text failures; their trace starts with the voice stages (``download``,
``transcode``, ``split``, ``speech_to_text``, each timed), followed by the pipeline's.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from bot.chat import conversation
from bot.chat.audio import AudioError, audio_duration_s, split_wav, transcode_to_wav
from bot.chat.commands import answer_command, parse_command, why_reply
from bot.chat.context import Busy, UpdateContext, no_indicator, run_update
from bot.chat.followups import reply_kind
from bot.chat.limits import bound_answer
from bot.chat.messages import t
from bot.chat.render import Text, render_result
from bot.chat.repeats import Repeat
from bot.chat.services import Services
from bot.chat.speech import is_filler_only, measure_speech
from bot.chat.types import Asker, Reply, VoiceNote, ui_language
from bot.chat.voice_reply import speech_for
from bot.errors import BotError, VoiceDownloadError
from clients.stt import Transcript
from rag.errors import ServiceError
from rag.language import script_language
from rag.numbers import side_by_side
from rag.text import clean_query
from rag.types import Reason, ReasonCode, Result, Stage, Status, Trace
from storage.db import ChatContext, ChatSettings, StoredDecision
from storage.inbox import decision_of_message

log = logging.getLogger(__name__)


async def reply_to_text(services: Services, asker: Asker, text: str, *,
                        bare_commands: bool = False, busy: Busy = no_indicator) -> Reply:
    """The reply to typed text on any channel: a command (:func:`bot.chat.commands.
    parse_command`; ``bare_commands`` for channels without a command menu), else, in reply to
    one of the bot's messages (``asker.replied_to``), "why?" (how that answer was decided),
    else a message made only of words like "tell me more", "ok thanks", "और बताओ"
    (:func:`bot.chat.followups.reply_kind`) in reply to the bot or while the chat has a
    conversation context (:func:`bot.chat.conversation.current`): a notice, in the language it
    was written in, that an answer cannot be continued but a short question on its topic is
    read with the previous one (searching it would only repeat that answer); else a question
    (:func:`answer_text`), read with the chat's context when it has one."""
    command = parse_command(text, bare_words=bare_commands)
    if command is not None:
        return await answer_command(services, asker, command)
    kind = reply_kind(text)
    if kind == "why" and asker.replied_to is not None:
        return await why_reply(services, asker, asker.replied_to)
    if kind == "follow_up" and (asker.replied_to is not None
                                or await conversation.current(services, asker) is not None):
        return await run_update(services, asker, _cannot_continue, ui_hint=script_language(text))
    return await answer_text(services, asker, text, busy=busy)


async def _cannot_continue(ctx: UpdateContext) -> Reply:
    return ctx.say("cannot_continue")


async def answer_text(services: Services, asker: Asker, text: str, *,
                      busy: Busy = no_indicator) -> Reply:
    """Answer a typed question in the chat's mode and language, or refuse with score and floor.

    Runs in the per-update step (``bot.chat.context.run_update``): without a ``/lang``
    choice, notices are in the question's script; a message already answered (replayed from the
    inbox) or the same question again is answered without counting against the rate limit;
    ``busy`` shows while the question is answered.

    Returns:
        The rendered answer or refusal; when rate-limited, nothing is recorded and the reply is
        "please wait N s", or empty.
    """
    return await run_update(services, asker, partial(_answer_text, text=text),
                            ui_hint=script_language(text),
                            unmetered=partial(_replayed_or_repeated, text=text), busy=busy)


async def _answer_text(ctx: UpdateContext, text: str) -> Reply:
    services, asker, chat = ctx.services, ctx.asker, ctx.chat
    context = await conversation.current(services, asker)
    result = bound_answer(await _ask(services, text, chat, hint_lang=None, context=context))
    _mark_forwarded(result.trace, asker)
    if result.status == Status.ERROR:
        await services.state.forget_repeat(asker, text)  # a retry of a failure deserves one
    decision_id = await _record(services, asker, "text", result)
    await conversation.remember(services, asker, result, context)
    lang = _reply_lang(result, chat, asker)
    return Reply([render_result(result, lang)], decision_id,
                 speech_for(result, lang, chat.voice, is_voice_question=False),
                 status=result.status, lang=lang)


async def _replayed_or_repeated(ctx: UpdateContext, text: str) -> Reply | None:
    """The reply to a typed question that is not counted against the rate limit: the answer
    already recorded for this very message (replayed after a crash between recording and
    replying), or the pointer for the same question again (see :func:`_repeat_reply`); None
    for a question to answer."""
    stored = await _stored_answer(ctx.services, ctx.asker, text)
    if stored is not None:
        lang = _reply_lang(stored.result, ctx.chat, ctx.asker)
        return Reply([render_result(stored.result, lang)], stored.id,
                     status=stored.result.status, lang=lang)
    repeat = await ctx.services.state.check_repeat(ctx.asker, text)
    return None if repeat is None else _repeat_reply(ctx.asker, repeat, ctx.ui)


async def answer_voice(services: Services, asker: Asker, voice: VoiceNote, *,
                       busy: Busy = no_indicator) -> Reply:
    """Answer a voice note: the reply shows the transcript it answered, then the answer.

    Runs in the per-update step (``bot.chat.context.run_update``); ``busy`` shows while the
    note is fetched, transcribed and answered. Notes over the channel's size limit
    (:attr:`bot.chat.policy.ChannelPolicy.max_voice_bytes`) and notes advertised
    longer than ``BOT_MAX_VOICE_S`` are refused before download, and notes that turn out longer
    after it (only the first ``BOT_MAX_VOICE_S`` + 1 s are ever decoded); notes over Sarvam's
    30 s are split and transcribed chunk by chunk. Sarvam's language code becomes the
    pipeline's ``hint_lang``; a ``/lang`` choice is sent to Sarvam and used as the explicit
    language.
    """
    return await run_update(services, asker, partial(_answer_voice, voice=voice), busy=busy)


async def _answer_voice(ctx: UpdateContext, voice: VoiceNote) -> Reply:
    services, asker, chat = ctx.services, ctx.asker, ctx.chat
    trace = Trace()
    _mark_forwarded(trace, asker)
    try:
        heard = await _transcribe(services, asker, voice, chat, trace)
    except _VoiceRefused as refused:
        return await _voice_refusal(services, asker, ctx.ui, trace, refused)
    context = await conversation.current(services, asker)
    result = bound_answer(await _ask(services, heard.text, chat, hint_lang=heard.language,
                                     context=context))
    result.trace.stages[:0] = trace.stages
    decision_id = await _record(services, asker, "voice", result, heard)
    await conversation.remember(services, asker, result, context)
    lang = _reply_lang(result, chat, asker, heard)
    return Reply([render_result(result, lang, transcript=heard.text)], decision_id,
                 speech_for(result, lang, chat.voice, is_voice_question=True),
                 status=result.status, lang=lang)


def _reply_lang(result: Result, chat: ChatSettings, asker: Asker,
                heard: Transcript | None = None) -> str:
    """The question's language ``result.lang`` when something determined it
    (``result.basis.is_determined``: the chat's ``/lang``, speech-to-text's language code, or
    the script of the question). Otherwise (emoji, digits, Chinese, a Tamil voice note, or no
    language stage) the pipeline's ``en`` is only a default, so the reply follows the chat or
    the user (see :func:`ui_language`)."""
    if chat.lang != "auto" or (heard is not None and heard.language) \
            or (result.basis is not None and result.basis.is_determined):
        return result.lang
    return ui_language(chat.lang, asker)


class _VoiceRefused(BotError):
    """A voice note that cannot reach the pipeline: ``key`` names the user message (formatted
    with ``message_args``), ``detail`` goes to the log and the trace."""

    def __init__(self, key: str, detail: str, *, status: Status = Status.REFUSED_BAD_INPUT,
                 heard: Transcript | None = None, **message_args: object) -> None:
        super().__init__(f"{key}: {detail}")
        self.key, self.detail, self.status, self.heard = key, detail, status, heard
        self.message_args = message_args


async def _transcribe(services: Services, asker: Asker, voice: VoiceNote, chat: ChatSettings,
                      trace: Trace) -> Transcript:
    """Checks, download, transcode (thread), split (thread), speech-to-text; each a stage.

    Raises:
        _VoiceRefused: too big or long, download failure, unreadable audio, speech-to-text
            failure, no speech.
    """
    max_s = services.settings.bot.max_voice_s
    max_bytes = services.policy(asker.channel).max_voice_bytes
    refused = _advertised_refusal(voice, max_s, max_bytes)
    trace.add("voice_checks", "refused" if refused else "passed", _advertised(voice))
    if refused is not None:
        raise refused
    try:
        with trace.timed("download") as stage:
            data = await voice.fetch()
            stage.detail = f"{len(data)} bytes"
        with trace.timed("transcode") as stage:
            # The advertised duration may lie (a 2.6 MB OGG holds an hour of 8 kHz Opus): decode
            # one second past the limit at most, enough to tell that the note is too long.
            max_decode_s = max_s + 1
            wav = await asyncio.to_thread(transcode_to_wav, data, max_decode_s)
            duration_s = audio_duration_s(wav)
            stage.detail = (f"16 kHz mono WAV, {duration_s:.1f} s "
                            f"(decoding stops at {max_decode_s} s)")
    except VoiceDownloadError as exc:
        raise _download_refusal(exc, max_bytes) from exc
    except AudioError as exc:
        raise _VoiceRefused("audio_unreadable", str(exc)) from exc
    if duration_s > max_s:
        raise _VoiceRefused("voice_too_long", f"{duration_s:.1f} s over {max_s} s", max_s=max_s)
    # bot.chat.speech: no Sarvam call for silence or noise
    with trace.timed("speech_gate") as stage:
        speech = await asyncio.to_thread(measure_speech, wav)
        stage.decision = "passed" if speech.has_question else "refused"
        stage.detail = speech.describe()
    if not speech.has_question:
        raise _VoiceRefused("no_question_heard", speech.describe())
    with trace.timed("split") as stage:
        chunks = await asyncio.to_thread(split_wav, wav)
        stage.decision = f"{len(chunks)} chunk(s)"
    try:
        with trace.timed("speech_to_text") as stage:
            explicit = None if chat.lang == "auto" else chat.lang
            heard = await services.stt.transcribe_long(chunks, language=explicit)
            stage.decision = heard.raw_language_code or "no language"
            stage.detail = f"{len(heard.text)} chars, {heard.n_attempts} attempt(s)"
    except ServiceError as exc:
        key = "stt_slow" if exc.reason == "timeout" else "stt_down"
        raise _VoiceRefused(key, str(exc), status=Status.ERROR) from exc
    if not heard.text:
        raise _VoiceRefused("no_speech", "empty transcript", heard=heard)
    if speech.is_mostly_silent and is_filler_only(heard.text):
        raise _VoiceRefused("no_question_heard", f"filler-only transcript of a mostly silent "
                            f"note: {speech.describe()}", heard=heard)
    return heard


def _advertised_refusal(voice: VoiceNote, max_s: int,
                        max_bytes: int | None) -> _VoiceRefused | None:
    """The refusal when the advertised size (bytes, over the channel's ``max_bytes``; None: no
    limit) or duration (s) rules the note out before download, else None."""
    if voice.file_size is not None and max_bytes is not None and voice.file_size > max_bytes:
        return _VoiceRefused("voice_too_big", f"{voice.file_size} bytes over the "
                             f"{max_bytes / 2**20:g} MB limit", max_mb=f"{max_bytes / 2**20:g}")
    if voice.duration_s is not None and voice.duration_s > max_s:
        return _VoiceRefused("voice_too_long", f"{voice.duration_s} s over {max_s} s",
                             max_s=max_s)
    return None


def _download_refusal(exc: VoiceDownloadError, max_bytes: int | None) -> _VoiceRefused:
    """Too large when the server said so (a refusal of the input; the limit stated is the
    channel's ``max_bytes``), else could not download (an error on the way)."""
    if exc.is_too_big:
        max_mb = exc.max_mb if exc.max_mb is not None else \
            (max_bytes or 0) / 2**20
        return _VoiceRefused("voice_too_big", f"download refused: {exc}", max_mb=f"{max_mb:g}")
    return _VoiceRefused("voice_download_failed", str(exc), status=Status.ERROR)


def _advertised(voice: VoiceNote) -> str:
    """What the sender advertised, for the trace: ``"36095 bytes, 3 s advertised"``, with
    ``size unknown`` / ``duration unknown`` for what was not reported (the console, audio
    documents)."""
    size = "size unknown" if voice.file_size is None else f"{voice.file_size} bytes"
    if voice.duration_s is None:
        return f"{size}, duration unknown"
    return f"{size}, {voice.duration_s:g} s advertised"


async def _ask(services: Services, query: str, chat: ChatSettings, hint_lang: str | None,
               context: ChatContext | None = None) -> Result:
    """The pipeline in the chat's mode, reading ``query`` after the chat's conversation
    ``context`` when there is one (``after=``, issue 44; None: read alone); CPU-bound work runs
    in threads, off the event loop. Every typed or spoken question reaches the pipeline here."""
    lang = None if chat.lang == "auto" else chat.lang
    after = None if context is None else context.turn
    return await services.answerer.ask(query, lang=lang, hint_lang=hint_lang, mode=chat.mode,
                                       after=after)


def _mark_forwarded(trace: Trace, asker: Asker) -> None:
    """A forwarded question starts its trace (the decision log and /why) with a ``forwarded``
    stage saying where it came from."""
    if asker.forwarded_from is not None:
        trace.stages.insert(0, Stage("forwarded", asker.forwarded_from.split()[0],
                                     f"from {asker.forwarded_from}", 0.0))


async def _stored_answer(services: Services, asker: Asker, text: str) -> StoredDecision | None:
    """The decision already recorded for this very message (same chat, message id and text),
    so a question replayed from the inbox is answered from it, not decided a second time."""
    if asker.message_id is None:
        return None
    stored = await decision_of_message(services.db, asker.channel, asker.chat_id,
                                       asker.message_id)
    if stored is None or stored.source != "text" or stored.result.query != clean_query(text):
        return None
    log.info("decision_reused id=%d chat_id=%d message_id=%d", stored.id, asker.chat_id,
             asker.message_id)
    return stored


def _repeat_reply(asker: Asker, repeat: Repeat, ui: str) -> Reply:
    """The same question again within ``BOT_REPEAT_WINDOW_S``: a one-line pointer the first
    time, nothing after; logged either way. Not counted against the rate limit."""
    is_pointer = repeat.n_repeat == 1
    log.info("repeat chat_id=%d message_id=%s first_message_id=%s age_s=%.1f n_repeat=%d "
             "reply=%s", asker.chat_id, asker.message_id, repeat.first_message_id, repeat.age_s,
             repeat.n_repeat, "pointer" if is_pointer else "dropped")
    return Reply([Text.plain(t("repeat_question", ui))], lang=ui) if is_pointer else Reply([])


async def _record(services: Services, asker: Asker, source: str, result: Result,
                  heard: Transcript | None = None) -> int:
    """Commit the decision (and its refusal row) and log it as one key=value line."""
    decision_id = await services.db.record_decision(
        asker.channel, asker.chat_id, asker.message_id, asker.user_id, source, result,
        transcript=heard.text if heard else None, stt_ms=heard.elapsed_ms if heard else None,
    )
    log.info(
        "decision id=%d channel=%s chat_id=%d source=%s status=%s lang=%s mode=%s top=%s "
        "floor=%s n_citations=%d pipeline_ms=%.1f stt_ms=%s forwarded=%s followup=%s",
        decision_id, asker.channel, asker.chat_id, source, result.status.value, result.lang,
        result.mode,
        *_top_and_floor(result), len(result.citations), result.trace.total_ms,
        f"{heard.elapsed_ms:.0f}" if heard else "-",
        asker.forwarded_from.split()[0] if asker.forwarded_from else "no",
        _followup_field(result),
    )
    return decision_id


async def _voice_refusal(services: Services, asker: Asker, ui: str, trace: Trace,
                         refused: _VoiceRefused) -> Reply:
    """Record a voice note that never reached the pipeline, and word it for the user."""
    trace.add("voice", refused.key, refused.detail)
    log.info("voice_refused chat_id=%d key=%s detail=%s", asker.chat_id, refused.key,
             refused.detail)
    heard = refused.heard
    limits = {name: float(value) for name, value in refused.message_args.items()}
    reason = Reason(ReasonCode.SPEECH_REFUSED, refused.detail, key=refused.key, **limits)
    result = Result(refused.status, heard.text if heard else "", ui, message=str(refused),
                    trace=trace, reason=reason)
    decision_id = await _record(services, asker, "voice", result, heard)
    return Reply([render_result(result, ui)], decision_id, status=result.status, lang=ui)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _followup_field(result: Result) -> str:
    """The log's ``followup=``: ``used`` (read with the chat's context), ``alone`` (a context
    was there, not leaned on), ``-`` (no context)."""
    if result.followup is None:
        return "-"
    return "used" if result.followup.is_followup else "alone"


def _top_and_floor(result: Result) -> tuple[str, str]:
    """The log line's ``top`` and ``floor``, compared as the guard compared them
    (:func:`rag.numbers.side_by_side`); ``-`` when unknown."""
    if result.top_score is None or result.floor is None:
        return _fmt(result.top_score), _fmt(result.floor)
    return side_by_side(result.top_score, result.floor)
