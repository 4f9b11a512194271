"""Speech-to-text through Sarvam's REST API (``POST {base_url}/speech-to-text``).

One request carries at most 30 s of audio (Sarvam REST limit); split longer notes first
(``bot.chat.audio.split_wav``) and call :meth:`SarvamSTT.transcribe_long`.

A whole note has one deadline, ``total_timeout_s``, across its chunks and their retries.

Retries: up to ``max_attempts`` attempts in total on 429 (waiting ``Retry-After`` when the server
sends it), 5xx, timeouts and connection errors, with exponential backoff in between. Every other
failure is raised at once. All failures surface as ``rag.errors.ServiceError("sarvam", reason,
detail)`` with ``reason`` one of ``timeout``, ``rate_limited``, ``server_error``, ``bad_request``,
``unauthorized``, ``malformed``, ``network``.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import random
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from clients.http import ServiceClient
from rag.errors import ServiceError
from rag.language import normalise_language
from rag.settings import bounded, settings_from_env, wire_text
from rag.text import clean_text

logger = logging.getLogger(__name__)

SERVICE = "sarvam"
AUTO_DETECT = "unknown"
"""``language_code`` value that asks Sarvam to detect the spoken language."""


@dataclass(frozen=True, slots=True)
class SarvamSettings:
    """Sarvam STT client settings; environment variables ``SARVAM_<FIELD>`` (e.g.
    ``SARVAM_API_KEY``, ``SARVAM_BASE_URL``, ``SARVAM_TIMEOUT_S``)."""

    # Subscription key sent as the ``api-subscription-key`` header (Sarvam dashboard).
    api_key: str = wire_text("")
    base_url: str = "https://api.sarvam.ai"
    # Sarvam docs: saaras:v3 transcribes the 22 scheduled Indian languages + English.
    model: str = "saaras:v3"
    # Seconds per network operation (connect, write, wait for the answer). 30 s of audio is
    # typically transcribed in 1-3 s; 10 s leaves room for a slow answer, and with the retries
    # below one chunk takes at most about 21 s.
    timeout_s: float = bounded(10.0, 0.1)
    # Seconds for a whole voice note (every chunk, retries and backoff included) before the user
    # hears "the speech service is slow"; 0 = no limit. A 120 s note is 5 chunks of typically
    # 1-3 s each (up to 15 s); 30 s doubles that and still lets a 1-chunk note retry once.
    total_timeout_s: float = bounded(30.0, 0.0)
    # Attempts in total (1 = no retry) for 429, 5xx, timeouts and connection errors.
    max_attempts: int = 2
    # Backoff before retry n (1-based): backoff_base_s * 2**(n-1), +-25 % jitter, capped.
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0
    # A 429 whose Retry-After is longer than this (seconds) is not waited for: the user would
    # be left without an answer; it fails at once as ``rate_limited``.
    retry_after_max_s: float = 10.0

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, prefix: str = "SARVAM_"
    ) -> SarvamSettings:
        """Read ``{prefix}API_KEY``, ``{prefix}BASE_URL``, ``{prefix}MODEL``, ``{prefix}TIMEOUT_S``,
        ``{prefix}TOTAL_TIMEOUT_S``, ``{prefix}MAX_ATTEMPTS``, ... from ``env`` (default
        ``os.environ``).

        Raises:
            ValueError: a malformed value, naming the variable."""
        return settings_from_env(cls, os.environ if env is None else env, prefix)


@dataclass(frozen=True, slots=True)
class Transcript:
    """What Sarvam heard.

    ``language`` is the corpus language (``en``/``hi``/``gu``/``te``) from Sarvam's language code,
    or None when Sarvam returned no code or one the corpus does not cover (e.g. ``ta-IN``);
    ``raw_language_code`` keeps Sarvam's code as sent (``hi-IN``, ``ta-IN``, or None).
    ``language_probability`` is Sarvam's confidence in [0, 1] when it detected the language.
    ``elapsed_ms`` is wall time including retries and backoff.
    """

    text: str
    language: str | None
    raw_language_code: str | None
    elapsed_ms: float
    language_probability: float | None = None
    request_id: str | None = None
    n_attempts: int = 1


class _Transient(ServiceError):
    """A failure worth another attempt; ``retry_after_s`` is the server's Retry-After, if any."""

    def __init__(self, reason: str, detail: str, retry_after_s: float | None = None) -> None:
        super().__init__(SERVICE, reason, detail)
        self.retry_after_s = retry_after_s


def retry_wait_s(state: RetryCallState, base_s: float, max_s: float) -> float:
    """Seconds to wait before the next attempt at a Sarvam call: the server's Retry-After when
    the failure carried one, else exponential backoff ``base_s * 2**(attempt - 1)`` with ±25 %
    jitter, capped at ``max_s`` (shared by the speech-to-text and text-to-speech clients)."""
    exc = state.outcome.exception() if state.outcome else None
    if isinstance(exc, _Transient) and exc.retry_after_s is not None:
        return exc.retry_after_s
    backoff = base_s * 2 ** (state.attempt_number - 1)
    return min(max_s, backoff * random.uniform(0.75, 1.25))


async def sarvam_post(
    client: httpx.AsyncClient,
    path: str,
    *,
    timeout_s: float,
    retry_after_max_s: float,
    retry_after_variable: str,
    **request: Any,
) -> Any:
    """One POST to a Sarvam endpoint (``request``: httpx's ``json``/``files``/``data``) and its
    parsed JSON body, shared by the speech-to-text and text-to-speech clients.

    Raises:
        _Transient: worth another attempt — a timeout (after ``timeout_s`` seconds), a network
            error, HTTP 5xx, or 429 whose Retry-After is at most ``retry_after_max_s`` seconds.
        ServiceError: ``rate_limited`` (a longer Retry-After, naming ``retry_after_variable``),
            ``unauthorized`` (401/403), ``bad_request`` (other 4xx), ``malformed`` (not JSON).
    """
    try:
        response = await client.post(path, **request)
    except httpx.TimeoutException as exc:
        raise _Transient("timeout", f"{type(exc).__name__} after {timeout_s:g} s") from exc
    except httpx.TransportError as exc:
        raise _Transient("network", f"{type(exc).__name__}: {exc}") from exc
    status = response.status_code
    if status == 429:
        retry_after_s = _parse_retry_after(response.headers.get("retry-after"))
        detail = f"HTTP 429 {_error_message(response)}"
        if retry_after_s is not None and retry_after_s > retry_after_max_s:
            raise ServiceError(
                SERVICE,
                "rate_limited",
                f"{detail}; Retry-After {retry_after_s:g} s exceeds "
                f"{retry_after_max_s:g} s ({retry_after_variable})",
            )
        raise _Transient("rate_limited", detail, retry_after_s)
    if status >= 500:
        raise _Transient("server_error", f"HTTP {status} {_error_message(response)}")
    if status in (401, 403):
        detail = f"HTTP {status} {_error_message(response)}; check SARVAM_API_KEY"
        raise ServiceError(SERVICE, "unauthorized", detail)
    if status >= 400:
        raise ServiceError(SERVICE, "bad_request", f"HTTP {status} {_error_message(response)}")
    try:
        return response.json()
    except ValueError as exc:
        raise ServiceError(
            SERVICE, "malformed", f"HTTP {status} body is not JSON: {response.text[:120]!r}"
        ) from exc


def sarvam_language_code(language: str | None) -> str:
    """Request ``language_code`` for a language: None/``auto``/``unknown`` -> ``unknown`` (detect),
    ``hi`` -> ``hi-IN``; a code with a region (``hi-IN``) is passed through."""
    if language is None or language.strip().lower() in {"", "auto", AUTO_DETECT}:
        return AUTO_DETECT
    language = language.strip()
    return language if "-" in language else f"{language.lower()}-IN"


def _parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP-date); None if absent/invalid."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _error_message(response: httpx.Response) -> str:
    """Sarvam's ``{"error": {"message", "code"}}`` as ``code: message``, else the body's start."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            parts = [str(err[k]) for k in ("code", "message", "detail") if err.get(k)]
            if parts:
                return ": ".join(parts)[:300]
    return str(body)[:200]


def _clean_text(value: object) -> str | None:
    """External text made safe to store and show (:func:`rag.text.clean_text`, without NFKC:
    the transcript is shown back as heard); None for a value that is not a string."""
    return clean_text(value, nfkc=False) if isinstance(value, str) else None


def _normalised_language(code: str | None) -> str | None:
    try:
        return normalise_language(code)
    except ValueError:
        return None  # a language Sarvam knows but the corpus does not cover (e.g. ta-IN)


class SarvamSTT(ServiceClient):
    """Async Sarvam speech-to-text client; owns one ``httpx.AsyncClient``.

    Use ``async with SarvamSTT(settings) as stt: await stt.transcribe(wav)``, or call
    :meth:`aclose` when done. ``transport`` is for tests and custom networking.
    """

    def __init__(
        self, settings: SarvamSettings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        headers = {"api-subscription-key": settings.api_key}
        super().__init__(settings.base_url, settings.timeout_s, headers, transport)
        self.settings = settings

    def _wait_s(self, state: RetryCallState) -> float:
        return retry_wait_s(state, self.settings.backoff_base_s, self.settings.backoff_max_s)

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait_s = state.next_action.sleep if state.next_action else 0.0
        logger.warning(
            "sarvam.stt retry attempt=%d reason=%s wait_s=%.2f detail=%s",
            state.attempt_number,
            getattr(exc, "reason", "?"),
            wait_s,
            getattr(exc, "detail", exc),
        )

    async def _attempt(self, wav: bytes, language_code: str) -> dict:
        """One POST; returns the JSON body or raises ``_Transient``/``ServiceError``."""
        body = await sarvam_post(
            self._client, "/speech-to-text", timeout_s=self.settings.timeout_s,
            retry_after_max_s=self.settings.retry_after_max_s,
            retry_after_variable="SARVAM_RETRY_AFTER_MAX_S",
            files={"file": ("audio.wav", wav, "audio/wav")},
            data={"model": self.settings.model, "language_code": language_code},
        )
        if not isinstance(body, dict) or not isinstance(body.get("transcript"), str):
            raise ServiceError(SERVICE, "malformed", f"no string 'transcript' in {str(body)[:120]}")
        return body

    async def transcribe(self, wav: bytes, language: str | None = None) -> Transcript:
        """Transcribe one WAV of at most 30 s.

        Args:
            wav: WAV bytes, ideally 16 kHz mono s16 (``bot.chat.audio.transcode_to_wav``).
            language: ``en``/``hi``/``gu``/``te`` or a Sarvam code such as ``hi-IN``; None (the
                default) lets Sarvam detect it.

        Returns:
            A :class:`Transcript`; ``text`` has control characters and lone surrogates replaced
            by spaces and whitespace folded, and may be empty for silence. A language code or
            request id that is not a string counts as missing (None).

        Raises:
            ServiceError: ``("sarvam", reason, detail)`` after the last attempt.
        """
        if not self.settings.api_key:
            raise ServiceError(SERVICE, "unauthorized", "no API key: set SARVAM_API_KEY")
        language_code = sarvam_language_code(language)
        start = time.perf_counter()
        n_attempts = 0
        retrying = AsyncRetrying(
            stop=stop_after_attempt(max(1, self.settings.max_attempts)),
            wait=self._wait_s,
            retry=retry_if_exception_type(_Transient),
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    n_attempts = attempt.retry_state.attempt_number
                    body = await self._attempt(wav, language_code)
        except ServiceError as exc:
            elapsed_ms = (time.perf_counter() - start) * 1000
            logger.warning(
                "sarvam.stt failed reason=%s n_attempts=%d n_bytes=%d took_ms=%.0f detail=%s",
                exc.reason,
                n_attempts,
                len(wav),
                elapsed_ms,
                exc.detail,
            )
            detail = f"{exc.detail}; {n_attempts} attempt(s)" if n_attempts > 1 else exc.detail
            raise ServiceError(SERVICE, exc.reason, detail) from exc
        raw_code = _clean_text(body.get("language_code")) or None  # e.g. 7 -> None
        probability = body.get("language_probability")
        transcript = Transcript(
            text=_clean_text(body["transcript"]),
            language=_normalised_language(raw_code),
            raw_language_code=raw_code,
            elapsed_ms=round((time.perf_counter() - start) * 1000, 3),
            language_probability=float(probability)
            if isinstance(probability, int | float)
            else None,
            request_id=_clean_text(body.get("request_id")) or None,
            n_attempts=n_attempts,
        )
        logger.info(
            "sarvam.stt ok request_id=%s language_code=%s n_chars=%d n_bytes=%d n_attempts=%d "
            "took_ms=%.0f",
            transcript.request_id,
            raw_code,
            len(transcript.text),
            len(wav),
            n_attempts,
            transcript.elapsed_ms,
        )
        return transcript

    async def transcribe_long(self, chunks: list[bytes], language: str | None = None) -> Transcript:
        """Transcribe consecutive WAV chunks (``bot.chat.audio.split_wav``) one after another and
        join, within ``settings.total_timeout_s`` seconds for them all (retries included).

        ``text`` joins the non-empty chunk texts with spaces; the language is the code Sarvam gave
        for most characters of text; ``elapsed_ms`` and ``n_attempts`` are totals; ``request_id``
        lists the chunks' ids, comma-separated.

        Raises:
            ValueError: ``chunks`` is empty.
            ServiceError: as :meth:`transcribe`, for the first chunk that fails; ``timeout`` when
                the chunks take longer than ``total_timeout_s`` in all.
        """
        if not chunks:
            raise ValueError("no audio chunks to transcribe: expected at least one WAV")
        start = time.perf_counter()
        limit_s = self.settings.total_timeout_s
        parts: list[Transcript] = []
        try:
            async with asyncio.timeout(limit_s if limit_s > 0 else None):
                for chunk in chunks:
                    parts.append(await self.transcribe(chunk, language))
        except TimeoutError as exc:
            detail = (f"{len(parts)} of {len(chunks)} chunk(s) transcribed in {limit_s:g} s, the "
                      f"limit for a whole note (SARVAM_TOTAL_TIMEOUT_S)")
            logger.warning("sarvam.stt deadline n_chunks=%d n_done=%d limit_s=%g", len(chunks),
                           len(parts), limit_s)
            raise ServiceError(SERVICE, "timeout", detail) from exc
        if len(parts) == 1:
            return parts[0]
        weights: Counter[str] = Counter()
        for part in parts:
            if part.raw_language_code:
                weights[part.raw_language_code] += max(1, len(part.text))
        raw_code = weights.most_common(1)[0][0] if weights else None
        probabilities = [
            p.language_probability
            for p in parts
            if p.raw_language_code == raw_code and p.language_probability is not None
        ]
        return Transcript(
            text=" ".join(p.text for p in parts if p.text),
            language=_normalised_language(raw_code),
            raw_language_code=raw_code,
            elapsed_ms=round((time.perf_counter() - start) * 1000, 3),
            language_probability=min(probabilities) if probabilities else None,
            request_id=",".join(p.request_id for p in parts if p.request_id) or None,
            n_attempts=sum(p.n_attempts for p in parts),
        )
