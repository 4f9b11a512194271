"""Text-to-speech through Sarvam's REST API (``POST {base_url}/text-to-speech``, Bulbul).

One request carries at most ``max_chars`` characters of text (Sarvam docs, bulbul:v3 REST: "up
to 2500 characters"); longer text is split at sentence ends (:func:`split_for_speech`), each
part synthesised in turn, and the WAVs joined into one. A whole text has one deadline,
``total_timeout_s``, across its parts and their retries.

Retries, as for speech-to-text (``clients.stt``): up to ``max_attempts`` attempts in total on 429
(waiting ``Retry-After`` when sent), 5xx, timeouts and connection errors, with exponential
backoff. Retries are logged; failures are not (the caller logs one line with its context). All
surface as ``rag.errors.ServiceError("sarvam_tts", reason, detail)`` with ``reason`` one of
``timeout``, ``rate_limited``, ``server_error``, ``bad_request``, ``unauthorized``, ``network``,
``malformed`` (no audio, not base64, not a PCM WAV, parts that do not match).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import logging
import os
import time
import wave
from collections.abc import Mapping
from dataclasses import dataclass

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from clients.http import ServiceClient
from clients.stt import (
    SarvamSettings,
    _Transient,
    retry_wait_s,
    sarvam_post,
)
from rag.errors import ServiceError
from rag.settings import bounded, settings_from_env
from rag.text import split_sentences

logger = logging.getLogger(__name__)

SERVICE = "sarvam_tts"
LANGUAGE_CODES = {"en": "en-IN", "hi": "hi-IN", "gu": "gu-IN", "te": "te-IN"}
"""``target_language_code`` per corpus language (Bulbul speaks all four)."""


@dataclass(frozen=True, slots=True)
class SarvamTTSSettings:
    """Sarvam text-to-speech settings; environment variables ``SARVAM_TTS_<FIELD>`` (e.g.
    ``SARVAM_TTS_MODEL``). The key and base URL are speech-to-text's (``SARVAM_API_KEY``,
    ``SARVAM_BASE_URL``)."""

    # Sarvam docs: bulbul:v3 speaks en, hi, gu, te (and 7 more Indian languages), 30+ voices.
    model: str = "bulbul:v3"
    # A bulbul:v3 voice; "shubh" is the model's default voice (Sarvam docs, "Text-to-Speech").
    speaker: str = "shubh"
    # Output sample rate in Hz sent as ``speech_sample_rate``; 24 kHz is bulbul:v3's default
    # and a rate Opus encodes natively.
    sample_rate_hz: int = bounded(24_000, 8_000, 48_000)
    # Characters per request: bulbul:v3's REST limit is 2,500 (bulbul:v2: 1,500).
    max_chars: int = bounded(2500, 50)
    # Seconds per network operation. A sentence is typically synthesised in under 1 s; 10 s
    # leaves room for a slow answer (the /why line then reads "timeout after 10 s").
    timeout_s: float = bounded(10.0, 0.1)
    # Seconds for one whole reply (every part, retries and backoff included); 0 = no limit.
    # The text answer is already sent, so this only bounds how late a voice reply may come.
    total_timeout_s: float = bounded(20.0, 0.0)
    # Attempts in total (1 = no retry) for 429, 5xx, timeouts and connection errors.
    max_attempts: int = bounded(2, 1)
    # Backoff before retry n (1-based): backoff_base_s * 2**(n-1), +-25 % jitter, capped.
    backoff_base_s: float = bounded(0.5, 0.0)
    backoff_max_s: float = bounded(8.0, 0.0)
    # A 429 whose Retry-After is longer than this (seconds) fails at once as ``rate_limited``.
    retry_after_max_s: float = bounded(10.0, 0.0)
    # Synthesised voice replies kept in memory (OGG/Opus, ~8 KB per spoken second at the
    # bot's 32 kbit/s), so a repeated answer is not paid for twice; 0 turns the cache off.
    # 32 MB holds about 70 minutes of speech.
    cache_mb: float = bounded(32.0, 0.0)

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, prefix: str = "SARVAM_TTS_"
    ) -> SarvamTTSSettings:
        """Read ``{prefix}MODEL``, ``{prefix}SPEAKER``, ``{prefix}TIMEOUT_S``, ... from ``env``
        (default ``os.environ``).

        Raises:
            ValueError: a malformed or out-of-range value, naming the variable."""
        return settings_from_env(cls, os.environ if env is None else env, prefix)


@dataclass(frozen=True, slots=True)
class SynthesizedSpeech:
    """Audio for one text: ``wav`` is one PCM WAV (the parts joined in order) of
    ``duration_s`` seconds at ``sample_rate_hz``; ``n_parts`` requests of at most
    ``max_chars`` characters each, ``n_attempts`` attempts in all; ``elapsed_ms`` is wall time
    including retries and backoff; ``request_ids`` are Sarvam's, in order."""

    wav: bytes
    sample_rate_hz: int
    duration_s: float
    n_parts: int
    n_attempts: int
    elapsed_ms: float
    request_ids: tuple[str, ...] = ()


def tts_language_code(language: str) -> str:
    """``target_language_code`` for a corpus language: ``hi`` -> ``hi-IN``; a code with a
    region (``hi-IN``) is passed through.

    Raises:
        ValueError: a language Bulbul is not asked to speak here (not en/hi/gu/te)."""
    if "-" in language:
        return language
    try:
        return LANGUAGE_CODES[language.lower()]
    except KeyError:
        raise ValueError(f"no text-to-speech language for {language!r}: expected one of "
                         f"{', '.join(LANGUAGE_CODES)}") from None


def split_for_speech(text: str, max_chars: int) -> list[str]:
    """Split ``text`` into parts of at most ``max_chars`` characters, at sentence ends (``.``,
    ``?``, ``!``, ``।``, ``॥``; :func:`rag.text.split_sentences`) where possible: sentences are
    packed greedily, joined by a space; a sentence longer than ``max_chars`` is cut at its last
    space before the limit (at the limit itself when it has none).

    Returns:
        Non-empty parts in order; an empty list for blank text.

    Raises:
        ValueError: ``max_chars`` < 1.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars of {max_chars} must be at least 1")
    pieces: list[str] = []
    for sentence in split_sentences(" ".join(text.split())):
        while len(sentence) > max_chars:
            cut = sentence.rfind(" ", 0, max_chars + 1)
            cut = cut if cut > 0 else max_chars
            pieces.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        if sentence:
            pieces.append(sentence)
    parts: list[str] = []
    for piece in pieces:
        if parts and len(parts[-1]) + 1 + len(piece) <= max_chars:
            parts[-1] = f"{parts[-1]} {piece}"
        else:
            parts.append(piece)
    return parts


def _wav_params(wav: bytes) -> tuple[tuple[int, int, int], bytes]:
    """((sample_rate_hz, n_channels, sample_width_bytes), PCM frames) of a WAV.

    Raises:
        ServiceError: ``malformed`` when it is not a PCM WAV or holds no audio."""
    try:
        with wave.open(io.BytesIO(wav), "rb") as w:
            params = (w.getframerate(), w.getnchannels(), w.getsampwidth())
            frames = w.readframes(w.getnframes())
    except (wave.Error, EOFError) as exc:
        raise ServiceError(SERVICE, "malformed",
                           f"audio of {len(wav)} bytes is not a PCM WAV: {exc}") from exc
    if not frames or params[0] <= 0:
        raise ServiceError(SERVICE, "malformed", f"audio of {len(wav)} bytes holds no samples")
    return params, frames


def join_wavs(wavs: list[bytes]) -> tuple[bytes, int, float]:
    """One WAV of ``wavs`` played in order: (wav, sample_rate_hz, duration_s).

    Raises:
        ServiceError: ``malformed`` when one is not a PCM WAV, holds no audio, or differs from
            the first in rate, channels or sample width.
    """
    first, frames = _wav_params(wavs[0])
    chunks = [frames]
    for n, wav in enumerate(wavs[1:], start=2):
        params, frames = _wav_params(wav)
        if params != first:
            raise ServiceError(SERVICE, "malformed",
                               f"part {n} is {params} (Hz, channels, bytes), part 1 {first}")
        chunks.append(frames)
    rate, n_channels, width = first
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(n_channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(b"".join(chunks))
    n_frames = sum(len(c) for c in chunks) // (n_channels * width)
    return out.getvalue(), rate, n_frames / rate


class SarvamTTS(ServiceClient):
    """Async Sarvam text-to-speech client; owns one ``httpx.AsyncClient``.

    ``async with SarvamTTS(sarvam, tts) as client: speech = await client.synthesize(text, "hi")``
    """

    def __init__(self, sarvam: SarvamSettings, settings: SarvamTTSSettings, *,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        headers = {"api-subscription-key": sarvam.api_key}
        super().__init__(sarvam.base_url, settings.timeout_s, headers, transport)
        self.api_key = sarvam.api_key
        self.settings = settings

    def _wait_s(self, state: RetryCallState) -> float:
        return retry_wait_s(state, self.settings.backoff_base_s, self.settings.backoff_max_s)

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        logger.warning("sarvam.tts retry attempt=%d reason=%s wait_s=%.2f detail=%s",
                       state.attempt_number, getattr(exc, "reason", "?"),
                       state.next_action.sleep if state.next_action else 0.0,
                       getattr(exc, "detail", exc))

    async def _attempt(self, text: str, language_code: str) -> tuple[bytes, str | None]:
        """One POST; (WAV bytes, request id) or raises ``_Transient``/``ServiceError``."""
        s = self.settings
        body = await sarvam_post(
            self._client, "/text-to-speech", timeout_s=s.timeout_s,
            retry_after_max_s=s.retry_after_max_s,
            retry_after_variable="SARVAM_TTS_RETRY_AFTER_MAX_S",
            json={"text": text, "target_language_code": language_code, "model": s.model,
                  "speaker": s.speaker, "speech_sample_rate": s.sample_rate_hz},
        )
        audios = body.get("audios") if isinstance(body, dict) else None
        if not isinstance(audios, list) or not audios or not all(
                isinstance(a, str) for a in audios):
            raise ServiceError(SERVICE, "malformed", f"no list of base64 'audios' in "
                                                     f"{str(body)[:120]}")
        try:
            wavs = [base64.b64decode(a, validate=True) for a in audios]
        except (binascii.Error, ValueError) as exc:
            raise ServiceError(SERVICE, "malformed", f"'audios' is not base64: {exc}") from exc
        wav = wavs[0] if len(wavs) == 1 else join_wavs(wavs)[0]
        request_id = body.get("request_id")
        return wav, request_id if isinstance(request_id, str) else None

    async def _synthesize_part(self, text: str, language_code: str) -> tuple[bytes, str | None,
                                                                             int]:
        """One part with retries: (WAV, request id, attempts)."""
        n_attempts = 0
        retrying = AsyncRetrying(stop=stop_after_attempt(self.settings.max_attempts),
                                 wait=self._wait_s, retry=retry_if_exception_type(_Transient),
                                 before_sleep=self._log_retry, reraise=True)
        try:
            async for attempt in retrying:
                with attempt:
                    n_attempts = attempt.retry_state.attempt_number
                    wav, request_id = await self._attempt(text, language_code)
        except ServiceError as exc:
            detail = f"{exc.detail}; {n_attempts} attempt(s)" if n_attempts > 1 else exc.detail
            raise ServiceError(SERVICE, exc.reason, detail) from exc
        _wav_params(wav)  # bad audio fails here, not in the transcoder
        return wav, request_id, n_attempts

    async def synthesize(self, text: str, language: str) -> SynthesizedSpeech:
        """Speak ``text`` in ``language`` (``en``/``hi``/``gu``/``te`` or a Sarvam code).

        Text over ``max_chars`` is split at sentence ends (:func:`split_for_speech`) and the
        parts' audio joined, all within ``total_timeout_s`` seconds.

        Raises:
            ValueError: blank text or a language not in ``LANGUAGE_CODES``.
            ServiceError: ``("sarvam_tts", reason, detail)`` for the first part that fails after
                its retries; ``timeout`` when the parts take longer than ``total_timeout_s``.
        """
        language_code = tts_language_code(language)
        parts = split_for_speech(text, self.settings.max_chars)
        if not parts:
            raise ValueError("no text to speak: expected at least one non-blank character")
        start = time.perf_counter()
        if not self.api_key:
            raise ServiceError(SERVICE, "unauthorized", "no API key: set SARVAM_API_KEY")
        limit_s = self.settings.total_timeout_s
        wavs: list[bytes] = []
        request_ids: list[str] = []
        n_attempts = 0
        try:
            async with asyncio.timeout(limit_s if limit_s > 0 else None):
                for part in parts:
                    wav, request_id, attempts = await self._synthesize_part(part, language_code)
                    wavs.append(wav)
                    n_attempts += attempts
                    if request_id:
                        request_ids.append(request_id)
        except TimeoutError as exc:
            raise ServiceError(SERVICE, "timeout", f"{len(wavs)} of {len(parts)} part(s) "
                               f"synthesised in {limit_s:g} s, the limit for a reply "
                               "(SARVAM_TTS_TOTAL_TIMEOUT_S)") from exc
        wav, rate, duration_s = join_wavs(wavs)
        speech = SynthesizedSpeech(wav, rate, round(duration_s, 3), len(parts), n_attempts,
                                   round((time.perf_counter() - start) * 1000, 3),
                                   tuple(request_ids))
        logger.info("sarvam.tts ok language_code=%s n_chars=%d n_parts=%d n_attempts=%d "
                    "duration_s=%.1f took_ms=%.0f", language_code, len(text), speech.n_parts,
                    n_attempts, speech.duration_s, speech.elapsed_ms)
        return speech
