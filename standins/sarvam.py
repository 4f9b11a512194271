"""A local server shaped like Sarvam's REST speech-to-text and text-to-speech APIs, for tests and
the dev script.

``POST /speech-to-text`` (multipart: ``file``, ``model``, ``language_code``; header
``api-subscription-key``) answers like https://api.sarvam.ai does::

    200 {"request_id": "...", "transcript": "...", "timestamps": null,
         "diarized_transcript": null, "language_code": "hi-IN", "language_probability": 0.98}
    403 {"error": {"message": "...", "code": "invalid_api_key_error"}}   missing or wrong key
    400 {"error": {"message": "...", "code": "invalid_request_error"}}   no file, unknown model or
        language code, not a 16 kHz mono 16-bit WAV, or over 30 s of audio

Which transcript it returns:
1. the next scripted :class:`Reply` queued with :meth:`SarvamStandin.enqueue` (a transcript, an
   error status with its body and headers, and/or a delay in seconds);
2. else the entry in ``transcripts`` keyed by :func:`audio_key` of the uploaded WAV;
3. else the ``"default"`` entry of ``transcripts``;
4. else an empty transcript (what Sarvam returns for silence).

``POST /text-to-speech`` (JSON: ``text``, ``target_language_code``, ``model``, ``speaker``,
``speech_sample_rate``) answers ``200 {"request_id": "...", "audios": ["<base64 WAV>"]}`` with
real speech it generates (espeak-ng in the target language, resampled to the requested rate; a
tone of ~60 ms per character where espeak-ng is missing, or with ``tts_voice="tone"``), the same
403 for a wrong key, and 400 for blank text, text over the model's limit (bulbul:v3 2,500
characters, bulbul:v2 1,500), an unknown model, language code or sample rate. Scripted
:class:`Reply` objects queued with :meth:`SarvamStandin.enqueue_tts` replace answers in order
(``Reply.error(500)``, ``Reply(delay_s=3)`` = generated audio after 3 s, ``Reply(body={...})`` =
that 200 body as is, e.g. bad audio). :attr:`SarvamStandin.tts_calls` records each request.

In tests::

    async with SarvamStandin(api_key="k") as sarvam:
        sarvam.enqueue(Reply.error(500), Reply(transcript="नमस्ते", language_code="hi-IN"))
        ... SarvamSettings(api_key="k", base_url=sarvam.base_url) ...
        sarvam.calls[0].form["language_code"]

Standalone (beside the fake Telegram server)::

    python -m standins.sarvam --port 8090 --api-key dev-key --transcripts transcripts.json

where ``transcripts.json`` maps ``audio_key(wav)`` (or ``"default"``) to a transcript string or
``{"transcript": ..., "language_code": ...}``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import hashlib
import io
import json
import logging
import math
import shutil
import struct
import subprocess
import time
import uuid
import wave
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from standins._server import LoopbackServer
from standins.voice_notes import wav_bytes

logger = logging.getLogger(__name__)

MAX_AUDIO_SECONDS = 30.0
"""Sarvam REST limit: "maximum duration of 30 seconds" per request."""
SAMPLE_RATE_HZ = 16_000
MODELS = frozenset({"saarika:v2", "saarika:v2.5", "saaras:v2.5", "saaras:v3", "saaras:v4"})
LANGUAGE_CODES = frozenset(
    {
        "unknown",
        "en-IN",
        "hi-IN",
        "bn-IN",
        "kn-IN",
        "ml-IN",
        "mr-IN",
        "od-IN",
        "pa-IN",
        "ta-IN",
        "te-IN",
        "gu-IN",
        "as-IN",
        "ur-IN",
        "ne-IN",
        "kok-IN",
        "ks-IN",
        "sd-IN",
        "sa-IN",
        "sat-IN",
        "mni-IN",
        "brx-IN",
        "mai-IN",
        "doi-IN",
    }
)
_MAX_UPLOAD_BYTES = 25 * 1024 * 1024
TTS_MAX_CHARS = {"bulbul:v2": 1500, "bulbul:v3": 2500, "bulbul:v3-beta": 2500}
"""Text-to-speech models and their REST limit in characters per request (Sarvam docs)."""
TTS_LANGUAGE_CODES = frozenset(
    {"en-IN", "hi-IN", "bn-IN", "ta-IN", "te-IN", "kn-IN", "ml-IN", "mr-IN", "gu-IN", "pa-IN",
     "od-IN"}
)
TTS_SAMPLE_RATES_HZ = frozenset({8000, 16000, 22050, 24000, 32000, 44100, 48000})
_ESPEAK_VOICES = {"en": "en", "hi": "hi", "bn": "bn", "ta": "ta", "te": "te", "kn": "kn",
                  "ml": "ml", "mr": "mr", "gu": "gu", "pa": "pa", "od": "or"}
_TONE_MS_PER_CHAR = 60  # about espeak-ng's speaking rate (175 words/min, ~6 chars a word)


def audio_key(wav: bytes) -> str:
    """Fixture key of a WAV: the first 16 hex digits of the SHA-256 of its PCM frames.

    Compute it on the WAV the bot sends (``bot.chat.audio.transcode_to_wav(ogg)``), which is
    deterministic for a given voice note.
    """
    with wave.open(io.BytesIO(wav), "rb") as w:
        frames = w.readframes(w.getnframes())
    return hashlib.sha256(frames).hexdigest()[:16]


@dataclass(slots=True)
class Reply:
    """One scripted answer. ``status`` 200 returns the transcript body; any other status returns
    ``body`` (a dict as JSON, a str as text; default Sarvam's error shape). ``delay_s`` seconds
    pass before answering (longer than the client's timeout = a timeout)."""

    transcript: str = ""
    language_code: str | None = "en-IN"
    language_probability: float | None = 0.98
    status: int = 200
    body: dict | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0

    @classmethod
    def error(
        cls,
        status: int,
        message: str = "",
        code: str = "",
        *,
        retry_after: float | None = None,
        delay_s: float = 0.0,
    ) -> Reply:
        """An error answer in Sarvam's shape; ``retry_after`` sets the Retry-After header (s)."""
        code = code or {403: "invalid_api_key_error", 429: "rate_limit_exceeded_error"}.get(
            status, "internal_server_error" if status >= 500 else "invalid_request_error"
        )
        headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
        return cls(
            status=status,
            body={"error": {"message": message or f"scripted {status}", "code": code}},
            headers=headers,
            delay_s=delay_s,
        )

    @classmethod
    def from_json(cls, value: str | Mapping[str, Any]) -> Reply:
        """From a transcripts-file entry: a transcript string or a dict of Reply fields."""
        if isinstance(value, str):
            return cls(transcript=value)
        return cls(**dict(value))


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One request as the stand-in saw it. ``duration_s``/``sample_rate_hz``/``n_channels`` are
    None when the file was missing or not a WAV."""

    path: str
    headers: dict[str, str]
    form: dict[str, str]
    filename: str | None
    content_type: str | None
    n_bytes: int
    duration_s: float | None
    sample_rate_hz: int | None
    n_channels: int | None
    status: int


@dataclass(frozen=True, slots=True)
class TTSCall:
    """One text-to-speech request as the stand-in saw it: its JSON ``body`` (empty when it was
    not a JSON object), the answer's ``status``, the seconds of audio returned (None when none),
    and ``synth_ms``, the milliseconds spent generating it, scripted ``delay_s`` excluded."""

    headers: dict[str, str]
    body: dict[str, Any]
    status: int
    duration_s: float | None = None
    synth_ms: float = 0.0
    delay_s: float = 0.0


def synthesize_wav(text: str, language_code: str, sample_rate_hz: int,
                   voice: str = "espeak") -> bytes:
    """Speech for ``text`` as a mono 16-bit PCM WAV at ``sample_rate_hz``: espeak-ng in the
    language of ``language_code`` (``hi-IN`` -> ``hi``) when ``voice`` is ``espeak`` and it is
    installed, else a 220 Hz tone of 60 ms per character (at least 0.3 s). Blocking: run it in a
    thread."""
    if voice == "espeak" and shutil.which("espeak-ng"):
        proc = subprocess.run(
            ["espeak-ng", "-v", _ESPEAK_VOICES.get(language_code.split("-")[0], "en"),
             "--stdout", text],
            capture_output=True, check=True, timeout=60)
        with wave.open(io.BytesIO(proc.stdout), "rb") as w:
            rate, frames = w.getframerate(), w.readframes(w.getnframes())
        if rate != sample_rate_hz:
            from pydub import AudioSegment  # audioop resampling, no ffmpeg

            segment = AudioSegment(frames, sample_width=2, frame_rate=rate, channels=1)
            frames = segment.set_frame_rate(sample_rate_hz).raw_data
    else:
        n = int(sample_rate_hz * max(0.3, len(text) * _TONE_MS_PER_CHAR / 1000))
        frames = struct.pack(f"<{n}h", *(int(8000 * math.sin(2 * math.pi * 220 * i /
                                                                 sample_rate_hz))
                                         for i in range(n)))
    return wav_bytes(frames, sample_rate_hz)


def _error(status: int, message: str, code: str) -> web.Response:
    return web.json_response({"error": {"message": message, "code": code}}, status=status)


class SarvamStandin(LoopbackServer):
    """The server; start with ``async with`` (or :meth:`start`/:meth:`stop`), then read
    :attr:`base_url` and :attr:`calls`."""

    def __init__(
        self,
        api_key: str = "test-key",
        transcripts: Mapping[str, Any] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        tts_voice: str = "espeak",
    ) -> None:
        super().__init__(host, port)
        self.api_key = api_key
        self.transcripts: dict[str, Reply] = {
            k: v if isinstance(v, Reply) else Reply.from_json(v)
            for k, v in (transcripts or {}).items()
        }
        self.calls: list[RecordedCall] = []
        self._script: collections.deque[Reply] = collections.deque()
        # text-to-speech: "espeak" (real speech) or "tone" (cheaper: benchmarks)
        self.tts_voice = tts_voice
        self.tts_calls: list[TTSCall] = []
        self._tts_script: collections.deque[Reply] = collections.deque()

    # ----- scripting -------------------------------------------------------------------------
    def enqueue(self, *replies: Reply) -> None:
        """Queue replies, used one per request in order before any default."""
        self._script.extend(replies)

    def enqueue_tts(self, *replies: Reply) -> None:
        """Queue text-to-speech answers, used one per request in order before generated speech:
        an error (``Reply.error(500)``), a delay before generated speech (``Reply(delay_s=3)``)
        or a raw 200 body (``Reply(body={"audios": ["bm90IGF1ZGlv"]})``)."""
        self._tts_script.extend(replies)

    def add_transcript(
        self,
        wav: bytes,
        transcript: str,
        language_code: str | None = "en-IN",
        language_probability: float | None = 0.98,
    ) -> str:
        """Answer ``transcript`` whenever this WAV is uploaded; returns its :func:`audio_key`."""
        key = audio_key(wav)
        self.transcripts[key] = Reply(transcript, language_code, language_probability)
        return key

    @property
    def n_pending(self) -> int:
        """Scripted replies not used yet."""
        return len(self._script)

    # ----- lifecycle -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return self.url

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=_MAX_UPLOAD_BYTES)
        app.router.add_post("/speech-to-text", self._speech_to_text)
        app.router.add_post("/text-to-speech", self._text_to_speech)
        return app

    # ----- text-to-speech --------------------------------------------------------------------
    async def _text_to_speech(self, request: web.Request) -> web.StreamResponse:
        body: dict[str, Any] = {}

        def record(response: web.StreamResponse, **extra: Any) -> web.StreamResponse:
            self.tts_calls.append(TTSCall(dict(request.headers), body, response.status, **extra))
            return response

        if request.headers.get("api-subscription-key") != self.api_key:
            return record(_error(403, "Invalid API key or missing api-subscription-key header",
                                 "invalid_api_key_error"))
        try:
            parsed = await request.json()
        except ValueError as exc:
            return record(_error(400, f"body is not JSON: {exc}", "invalid_request_error"))
        if not isinstance(parsed, dict):
            return record(_error(400, "body must be a JSON object", "invalid_request_error"))
        body = parsed
        text, model = body.get("text"), body.get("model", "bulbul:v3")
        language_code = body.get("target_language_code")
        rate = body.get("speech_sample_rate", 24000)
        problem = None
        if not isinstance(text, str) or not text.strip():
            problem = "field 'text' must be a non-empty string"
        elif model not in TTS_MAX_CHARS:
            problem = f"unknown model {model!r}"
        elif len(text) > TTS_MAX_CHARS[model]:
            problem = (f"text is {len(text)} characters; {model} accepts at most "
                       f"{TTS_MAX_CHARS[model]} per request")
        elif language_code not in TTS_LANGUAGE_CODES:
            problem = f"unsupported target_language_code {language_code!r}"
        elif rate not in TTS_SAMPLE_RATES_HZ:
            problem = f"unsupported speech_sample_rate {rate!r}"
        if problem:
            return record(_error(400, problem, "invalid_request_error"))
        reply = self._tts_script.popleft() if self._tts_script else Reply()
        if reply.delay_s > 0:
            await asyncio.sleep(reply.delay_s)  # cancelled if the client gives up first
        if reply.status != 200 or reply.body is not None:
            payload = reply.body if reply.body is not None else {
                "error": {"message": f"scripted {reply.status}", "code": "internal_server_error"}}
            response = (web.json_response(payload, status=reply.status, headers=reply.headers)
                        if isinstance(payload, dict)
                        else web.Response(text=payload, status=reply.status,
                                          headers=reply.headers))
            return record(response, delay_s=reply.delay_s)
        start = time.perf_counter()
        wav = await asyncio.to_thread(synthesize_wav, text, language_code, rate, self.tts_voice)
        synth_ms = (time.perf_counter() - start) * 1000
        with wave.open(io.BytesIO(wav), "rb") as w:
            duration_s = w.getnframes() / w.getframerate()
        return record(
            web.json_response({"request_id": f"standin-{uuid.uuid4().hex[:12]}",
                               "audios": [base64.b64encode(wav).decode("ascii")]},
                              headers=reply.headers),
            duration_s=duration_s, synth_ms=synth_ms, delay_s=reply.delay_s)

    # ----- the endpoint ----------------------------------------------------------------------
    async def _speech_to_text(self, request: web.Request) -> web.StreamResponse:
        form: dict[str, str] = {}
        upload: web.FileField | None = None
        wav = b""
        info: tuple[float, int, int] | None = None

        def record(response: web.StreamResponse) -> web.StreamResponse:
            self.calls.append(
                RecordedCall(
                    path=request.path,
                    headers=dict(request.headers),
                    form=form,
                    filename=upload.filename if upload else None,
                    content_type=upload.content_type if upload else None,
                    n_bytes=len(wav),
                    duration_s=info[0] if info else None,
                    sample_rate_hz=info[1] if info else None,
                    n_channels=info[2] if info else None,
                    status=response.status,
                )
            )
            return response

        if request.headers.get("api-subscription-key") != self.api_key:
            return record(
                _error(
                    403,
                    "Invalid API key or missing api-subscription-key header",
                    "invalid_api_key_error",
                )
            )
        try:
            post = await request.post()
        except ValueError as exc:
            return record(
                _error(400, f"could not parse multipart body: {exc}", "invalid_request_error")
            )
        for name, value in post.items():
            if isinstance(value, web.FileField):
                if name == "file":
                    upload = value
                    wav = value.file.read()
            else:
                form[name] = str(value)
        if upload is None:
            return record(_error(400, "field 'file' is required", "invalid_request_error"))
        model = form.get("model", "saarika:v2.5")
        if model not in MODELS:
            return record(_error(400, f"unknown model {model!r}", "invalid_request_error"))
        language_code = form.get("language_code", "unknown")
        if language_code not in LANGUAGE_CODES:
            return record(
                _error(400, f"unsupported language_code {language_code!r}", "invalid_request_error")
            )
        try:
            with wave.open(io.BytesIO(wav), "rb") as w:
                rate, n_channels, width, n_frames = (
                    w.getframerate(),
                    w.getnchannels(),
                    w.getsampwidth(),
                    w.getnframes(),
                )
        except (wave.Error, EOFError) as exc:
            return record(_error(400, f"file is not a PCM WAV: {exc}", "invalid_request_error"))
        info = (n_frames / rate if rate else 0.0, rate, n_channels)
        if (rate, n_channels, width) != (SAMPLE_RATE_HZ, 1, 2):
            return record(
                _error(
                    400,
                    f"expected 16000 Hz mono 16-bit WAV, got {rate} Hz, {n_channels} channel(s), "
                    f"{8 * width}-bit",
                    "invalid_request_error",
                )
            )
        if info[0] > MAX_AUDIO_SECONDS:
            return record(
                _error(
                    400,
                    f"audio is {info[0]:.1f} s; the REST API accepts at most "
                    f"{MAX_AUDIO_SECONDS:g} s (use the Batch API)",
                    "invalid_request_error",
                )
            )

        reply = self._choose(wav, language_code)
        if reply.delay_s > 0:
            await asyncio.sleep(reply.delay_s)  # cancelled if the client gives up first
        if reply.status != 200:
            body = (
                reply.body
                if reply.body is not None
                else {
                    "error": {
                        "message": f"scripted {reply.status}",
                        "code": "internal_server_error",
                    }
                }
            )
            response = (
                web.json_response(body, status=reply.status, headers=reply.headers)
                if isinstance(body, dict)
                else web.Response(text=body, status=reply.status, headers=reply.headers)
            )
            return record(response)
        if reply.body is not None:  # scripted raw 200 body, e.g. malformed JSON
            return record(
                web.Response(
                    text=reply.body if isinstance(reply.body, str) else json.dumps(reply.body),
                    content_type="application/json",
                    headers=reply.headers,
                )
            )
        detected = reply.language_code if language_code == "unknown" else language_code
        return record(
            web.json_response(
                {
                    "request_id": f"standin-{uuid.uuid4().hex[:12]}",
                    "transcript": reply.transcript,
                    "timestamps": None,
                    "diarized_transcript": None,
                    "language_code": detected
                    if reply.transcript or language_code != "unknown"
                    else None,
                    "language_probability": reply.language_probability
                    if language_code == "unknown"
                    else None,
                },
                headers=reply.headers,
            )
        )

    def _choose(self, wav: bytes, language_code: str) -> Reply:
        if self._script:
            return self._script.popleft()
        key = audio_key(wav)
        if key in self.transcripts:
            return self.transcripts[key]
        if "default" in self.transcripts:
            return self.transcripts["default"]
        return Reply(transcript="", language_code=None, language_probability=None)


async def _serve(args: argparse.Namespace) -> None:
    transcripts = json.loads(Path(args.transcripts).read_text("utf-8")) if args.transcripts else {}
    async with SarvamStandin(
        api_key=args.api_key, transcripts=transcripts, host=args.host, port=args.port,
        tts_voice=args.tts_voice,
    ) as standin:
        print(
            f"sarvam standin listening base_url={standin.base_url} "
            f"n_transcripts={len(standin.transcripts)}",
            flush=True,
        )
        await standin.run_until_signal()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m standins.sarvam", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090, help="0 picks a free port")
    parser.add_argument("--api-key", default="test-key", help="expected api-subscription-key")
    parser.add_argument("--transcripts", help="JSON file: {audio_key or 'default': transcript}")
    parser.add_argument("--tts-voice", choices=("espeak", "tone"), default="espeak",
                        help="what /text-to-speech speaks with (tone: a 220 Hz beep)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(_serve(args))


if __name__ == "__main__":
    main()
