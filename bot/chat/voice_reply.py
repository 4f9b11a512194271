"""Spoken replies: what to say (:func:`speech_for`, by the chat's ``/voice on|off|auto``), making
the voice note (:func:`make_voice`: Sarvam text-to-speech, cached, then OGG/Opus via
pydub/ffmpeg in a thread) and recording how it went (:func:`record_voice`).

The text reply is always sent first and never waits for, or depends on, the voice note: a
failure here (service down, slow, over quota, bad audio, upload refused) is one log line and a
failed ``text_to_speech`` stage in the decision's trace, shown by ``/why`` with its latency.
Channel-free: ``bot.chat.delivery.speak`` hands the audio to the front end's outbox (Telegram
``sendVoice``, WhatsApp upload and ``audio`` message, the console a file). A spoken reply says
at most ``bot.chat.limits.MAX_SPEECH_CHARS`` characters and lasts at most
``MAX_VOICE_REPLY_S`` seconds (its audio is trimmed when encoded).
"""

from __future__ import annotations

import asyncio
import io
import logging
import re
import time
import warnings
from dataclasses import dataclass

from bot.chat.audio import AudioError
from bot.chat.limits import ANSWER_BOUND_STAGE, MAX_SPEECH_CHARS, MAX_VOICE_REPLY_S, bound_text
from bot.chat.messages import t
from bot.chat.render import refusal_text
from bot.chat.services import Services
from bot.chat.types import Asker, Reply, Speech
from bot.chat.voice_cache import VoiceAudio
from clients.tts import LANGUAGE_CODES, tts_language_code
from rag.errors import ServiceError
from rag.types import Result, Stage
from storage.errors import DecisionNotFoundError

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Couldn't find ffmpeg", RuntimeWarning)
    from pydub import AudioSegment
    from pydub.exceptions import CouldntDecodeError, CouldntEncodeError

log = logging.getLogger(__name__)

STAGE = "text_to_speech"
"""Trace stage of the Sarvam call (``/why``: ``text_to_speech — failed: timeout: ...``)."""
ENCODE_STAGE = "encode_voice"
"""Trace stage of the WAV to OGG/Opus encoding (ffmpeg, in a thread)."""
OPUS_BITRATE = "32k"
"""Opus bit rate of voice replies: speech is clear at 24-32 kbit/s (Telegram's own voice notes
are ~30 kbit/s); ~4 KB per second of speech."""
OPUS_COMPLEXITY = 5
"""libopus complexity 0-10 (default 10): 5 encodes speech markedly faster than 10 here, and
most of what remains of its time is ffmpeg's start-up (docs/benchmarks.md, "Spoken replies");
speech at 32 kbit/s keeps its clarity (Opus docs: complexity trades little quality at speech
bit rates)."""
OPUS_SAMPLE_RATE_HZ = 48_000
"""Opus codes at 48 kHz (RFC 7845 players expect it; libopus refuses 22,050 Hz input)."""

# Citation marks a generated answer may carry ("[1]", "en-1102432-5"): never read aloud.
_CITATION_MARK = re.compile(r"\[\d+\]|\b(?:en|hi|gu|te)-\d+-\d+\b")


def speech_for(result: Result, lang: str, voice_mode: str, *,
               is_voice_question: bool) -> Speech | None:
    """What to say after the text reply to ``result``, or None for no voice note.

    ``voice_mode`` is the chat's ``/voice`` choice: ``off`` never speaks, ``on`` always,
    ``auto`` only when the question was a voice note (``is_voice_question``). An answer is
    spoken as its text alone (citation marks removed) in the answer's language, a hedged one
    (``Status.HEDGED``) inside the hedge's words in ``lang``; a refusal as
    the sentence the text reply shows, with its score and floor, in ``lang`` (the reply's
    language). A note longer than ``MAX_SPEECH_CHARS``, or an answer the text reply already
    shortened, is cut and ends by saying it was shortened, in the note's language. Errors,
    and languages Bulbul is not asked to speak here, are not spoken.
    """
    if voice_mode == "off" or (voice_mode == "auto" and not is_voice_question):
        return None
    if result.shows_answer:
        text = " ".join(_CITATION_MARK.sub(" ", result.answer).split())
        if result.is_hedged:  # the note says the hedge too, in the reply's language
            text = t("hedged_spoken", lang, answer=text)
        else:
            lang = result.answer_lang or lang
    elif result.status.is_refusal:
        text = refusal_text(result, lang)
    else:
        return None
    was_bound = result.trace.get(ANSWER_BOUND_STAGE) is not None
    if result.shows_answer and (len(text) > MAX_SPEECH_CHARS or was_bound):
        note = t("answer_shortened_spoken", lang)  # said in the note's own language
        if len(text) > MAX_SPEECH_CHARS - len(note) - 1:
            text, _ = bound_text(text, MAX_SPEECH_CHARS - len(note) - 1)
        text = f"{text} {note}"
    elif len(text) > MAX_SPEECH_CHARS:
        text, _ = bound_text(text, MAX_SPEECH_CHARS)
    return Speech(text, lang) if text and lang in LANGUAGE_CODES else None


def encode_voice_note(wav: bytes, max_s: float = MAX_VOICE_REPLY_S) -> VoiceAudio:
    """A PCM WAV as a voice note: OGG/Opus, mono, 48 kHz, ``OPUS_BITRATE``, its first ``max_s``
    seconds at most; runs ffmpeg (blocking: run it in a thread, ``Services.voice_pool``).

    Raises:
        AudioError: the WAV is unreadable or ffmpeg failed (or is missing).
    """
    try:
        segment = AudioSegment.from_wav(io.BytesIO(wav))[:int(max_s * 1000)]
        out = io.BytesIO()
        segment.set_channels(1).export(
            out, format="ogg", codec="libopus", bitrate=OPUS_BITRATE,
            parameters=["-ar", str(OPUS_SAMPLE_RATE_HZ), "-application", "voip",
                        "-compression_level", str(OPUS_COMPLEXITY)])
    except (CouldntDecodeError, CouldntEncodeError, OSError, ValueError, EOFError) as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        raise AudioError(f"could not encode {len(wav)} bytes of WAV as OGG/Opus: "
                         f"{lines[-1] if lines else type(exc).__name__}") from exc
    return VoiceAudio(out.getvalue(), round(len(segment) / 1000, 3))


@dataclass(frozen=True, slots=True)
class VoiceOutcome:
    """The voice note (None when it could not be made) and the stages that made it:
    ``text_to_speech`` (Sarvam, retries included; ``cached`` when reused), then
    ``encode_voice`` (WAV to OGG/Opus) when it was synthesised."""

    audio: VoiceAudio | None
    stages: list[Stage]
    failure: str | None = None
    """Why it could not be made: the speech client's reason (``ServiceError.reason``, e.g.
    ``timeout``) or ``encode``; None when it was made."""


async def make_voice(services: Services, speech: Speech) -> VoiceOutcome:
    """The voice note for ``speech``: from the cache when the same text, language, speaker and
    model were spoken before, else synthesised by Sarvam and encoded to OGG/Opus in
    ``services.voice_pool`` (then cached). Never raises for a service or audio failure: the
    last stage says ``failed``, e.g. ``text_to_speech — failed: timeout: ReadTimeout after 10 s``.
    """
    tts_settings = services.settings.tts
    language_code = tts_language_code(speech.lang)
    key = (speech.text, language_code, tts_settings.speaker, tts_settings.model)
    voice = f"{language_code} {tts_settings.speaker} {tts_settings.model}"
    start = time.perf_counter()
    cached = await services.state.cached_voice(key)
    if cached is not None:
        return VoiceOutcome(cached, [Stage(
            STAGE, "cached", f"{voice}, {cached.duration_s:.1f} s of audio, {len(speech.text)} "
                             "chars", _ms_since(start))])
    try:
        if services.tts is None:
            raise ServiceError("sarvam_tts", "unauthorized", "no text-to-speech client")
        synthesized = await services.tts.synthesize(speech.text, speech.lang)
    except ServiceError as exc:
        return VoiceOutcome(None, [Stage(STAGE, "failed", f"{exc.reason}: {exc.detail}",
                                         _ms_since(start))], exc.reason)
    spoken = Stage(STAGE, "ok", f"{voice}, {synthesized.n_parts} part(s), "
                                f"{synthesized.n_attempts} attempt(s), {len(speech.text)} chars",
                   _ms_since(start))
    start = time.perf_counter()
    try:
        audio = await asyncio.get_running_loop().run_in_executor(
            services.voice_pool, encode_voice_note, synthesized.wav)
    except AudioError as exc:
        return VoiceOutcome(None, [spoken, Stage(ENCODE_STAGE, "failed", str(exc),
                                                 _ms_since(start))], "encode")
    await services.state.keep_voice(key, audio)
    return VoiceOutcome(audio, [spoken, Stage(
        ENCODE_STAGE, "ok", f"{audio.duration_s:.1f} s of audio, {len(synthesized.wav)} bytes WAV "
                            f"-> {len(audio.ogg)} bytes OGG/Opus", _ms_since(start))])


async def record_voice(services: Services, asker: Asker, reply: Reply,
                       stages: list[Stage], failure: str | None = None) -> None:
    """Log the spoken reply as one line (``voice_reply ... status=ok|cached|failed``) and add
    its ``stages`` (:class:`VoiceOutcome`'s, then how it was delivered) to the decision's
    trace, with ``failure`` (:attr:`VoiceOutcome.failure`) as its ``tts_failure``."""
    failed = next((s for s in stages if s.decision == "failed"), None)
    status = "failed" if failed else stages[0].decision
    log_at = log.warning if failed else log.info
    log_at("voice_reply channel=%s chat_id=%d decision_id=%s status=%s lang=%s n_chars=%d %s",
           asker.channel, asker.chat_id, reply.decision_id, status,
           reply.speech.lang if reply.speech else "-",
           len(reply.speech.text) if reply.speech else 0,
           " ".join(f"{s.name}_ms={s.elapsed_ms:.0f}" for s in stages)
           + (f" stage={failed.name} detail={failed.detail}" if failed else ""))
    if reply.decision_id is not None:
        try:
            await services.db.add_stages(reply.decision_id, stages, failure)
        except DecisionNotFoundError:  # a test or an operator cleared it
            log.warning("voice_reply_untraced decision_id=%s", reply.decision_id)


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000
