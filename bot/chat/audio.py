"""Voice-note audio: decode, convert to what Sarvam STT wants, measure and split.

Pure helpers (no Telegram imports). Every function is synchronous and CPU/subprocess bound:
call them from handlers with ``await asyncio.to_thread(transcode_to_wav, data)``.

Decoding goes through pydub, which runs ``ffmpeg`` on bytes piped in memory.
"""

from __future__ import annotations

import io
import logging
import shutil
import time
import warnings
import wave

with warnings.catch_warnings():
    # pydub warns at import when ffmpeg is missing; bot.startup says so in one line with the fix
    warnings.filterwarnings("ignore", "Couldn't find ffmpeg", RuntimeWarning)
    from pydub import AudioSegment
    from pydub.exceptions import CouldntDecodeError
    from pydub.silence import detect_silence

from bot.chat.ogg import check_ogg
from bot.errors import BotError

logger = logging.getLogger(__name__)

MAX_AUDIO_BYTES = 20 * 1024 * 1024
"""Largest encoded audio decoded, on any channel: memory stays bounded whatever a front end
lets through. Each channel's own download limit is its policy (``bot.chat.policy``: Telegram's
Bot API 20 MB, WhatsApp's 16 MB); a local file in the console is held to this one."""

SARVAM_MAX_SECONDS = 30.0
"""Longest audio Sarvam's synchronous REST ``/speech-to-text`` accepts (docs: "maximum duration
of 30 seconds"; longer audio needs the Batch API)."""

TARGET_SAMPLE_RATE_HZ = 16_000
TARGET_CHANNELS = 1
TARGET_SAMPLE_WIDTH_BYTES = 2  # signed 16-bit little-endian PCM

DEFAULT_CHUNK_SECONDS = 29.0
"""Chunk length for :func:`split_wav`: one second of margin under :data:`SARVAM_MAX_SECONDS`."""

# Silence search for split points: a pause of at least this long, this far below the clip's
# average loudness, in the last part of each window. Spoken pauses between phrases are
# 200-600 ms; espeak-ng sentence gaps are ~400 ms.
_MIN_SILENCE_MS = 250
_SILENCE_BELOW_AVERAGE_DB = 16.0
_SILENCE_SEARCH_FRACTION = 0.4  # search the last 40 % of each window
_SILENCE_SEEK_STEP_MS = 10


class AudioError(BotError, ValueError):
    """Audio that cannot be used: empty, too large, corrupt or in a format ffmpeg cannot decode
    (a ``ValueError`` too: a bad argument such as ``max_seconds`` of 0 raises it as well).

    ``str(err)`` says what was wrong with numbers (bytes, seconds) and, where there is one, the fix.
    """


def ffmpeg_available() -> bool:
    """True when the ``ffmpeg`` binary pydub uses is on ``PATH`` (needed to decode OGG/Opus)."""
    return shutil.which(AudioSegment.converter) is not None or shutil.which("ffmpeg") is not None


def _decode(data: bytes, max_seconds: float | None = None) -> AudioSegment:
    """Decode any ffmpeg-readable bytes (OGG/Opus, MP3, WAV, ...) into an AudioSegment: the
    first ``max_seconds`` seconds only (ffmpeg ``-t``, so the rest is never decoded), or all of
    it when None.

    Raises:
        AudioError: empty input, over ``MAX_AUDIO_BYTES``, ffmpeg missing, or undecodable.
    """
    if not data:
        raise AudioError("empty audio: 0 bytes received; send a voice note with speech in it")
    if len(data) > MAX_AUDIO_BYTES:
        raise AudioError(
            f"audio of {len(data) / 2**20:.1f} MB is over the "
            f"{MAX_AUDIO_BYTES / 2**20:.0f} MB limit; send a shorter voice note"
        )
    if data[:4] == b"RIFF":
        try:
            segment = AudioSegment.from_wav(io.BytesIO(data))  # at most 20 MB, no decoding
            return segment if max_seconds is None else segment[:int(max_seconds * 1000)]
        except Exception:  # pydub falls back to ffmpeg itself for odd WAVs; do the same
            pass
    if not ffmpeg_available():
        raise AudioError(
            "ffmpeg is not installed: install it (apt-get install ffmpeg) to decode voice"
        )
    try:
        # Telegram voice notes are OGG/Opus: naming the decoder spares pydub an ffprobe run
        # and ffmpeg's native opus decoder beats libopus (docs/benchmarks.md, "Figures behind
        # the code's constants").
        is_ogg_opus = data[:4] == b"OggS" and b"OpusHead" in data[:128]
        segment = AudioSegment.from_file(io.BytesIO(data), codec="opus" if is_ogg_opus else None,
                                         duration=max_seconds)
    except (CouldntDecodeError, IndexError, KeyError, OSError) as exc:
        # IndexError/KeyError: ffprobe found no audio stream, so pydub indexes an empty list.
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        reason = lines[-1] if lines else type(exc).__name__  # ffmpeg's last line says why
        raise AudioError(
            f"could not decode {len(data)} bytes of audio (not OGG/Opus or another format ffmpeg "
            f"reads): {reason}"
        ) from exc
    if len(segment) == 0:
        raise AudioError(f"audio of {len(data)} bytes decoded to 0 ms of sound")
    return segment


PARTIAL_DECODE_S = 0.1
"""How much shorter than its pages claim a decoded note may be before the decode counts as
partial: five 20 ms Opus frames, past any rounding of the end trim."""


def _warn_if_partial(data: bytes, decoded_s: float, max_seconds: float | None) -> None:
    """Log a warning when an Ogg note decoded only in part: its pages are damaged (cut short,
    or garbage where a page should be) or claim more sound than was decoded (beyond
    ``max_seconds``, which stops decoding on purpose). Durations are stated only when the pages'
    granule positions are plausible (``bot.chat.ogg``: those RFC 7845 requires of the packets on
    each page); otherwise the line says what happened and why no duration is given, since a cut
    or hostile header can claim anything (2**40 samples: 265 days)."""
    if data[:4] != b"OggS":
        return
    damage, claimed_s, implausible, is_whole = check_ogg(data, max_seconds)
    if implausible:
        if damage:
            logger.warning("audio decoded in part: n_bytes=%d; the note was cut or damaged (%s); "
                           "no duration stated: its page headers are implausible: %s",
                           len(data), damage, implausible)
        else:
            logger.warning("audio page headers implausible: n_bytes=%d; %s; decoded as far as "
                           "ffmpeg reads it, no duration stated", len(data), implausible)
        return
    expected_s = claimed_s if max_seconds is None or claimed_s is None \
        else min(claimed_s, max_seconds)
    is_short = expected_s is not None and decoded_s < expected_s - PARTIAL_DECODE_S
    if damage or is_short:
        claims = "" if claimed_s is None else \
            f" of the {claimed_s:.2f}{'' if is_whole else '+'} s its pages claim"
        logger.warning("audio decoded in part: n_bytes=%d decoded_s=%.2f%s; %s", len(data),
                       decoded_s, claims, damage or "pages claim more sound than decoded")


def _to_wav_bytes(segment: AudioSegment) -> bytes:
    out = io.BytesIO()
    segment.export(out, format="wav")  # written by pydub with the wave module, no ffmpeg run
    return out.getvalue()


def transcode_to_wav(data: bytes, max_seconds: float | None = None) -> bytes:
    """Convert a voice note (Telegram's OGG/Opus, or any format ffmpeg reads) to Sarvam's format.

    Args:
        data: the encoded audio file, at most :data:`MAX_AUDIO_BYTES`.
        max_seconds: decode and return at most this many seconds (> 0); the rest of the file is
            never decoded, so a small file that holds hours of audio costs no more memory than
            ``max_seconds`` of it (an hour of 8 kHz Opus is 2.6 MB encoded, ~350 MB decoded at
            48 kHz). None converts everything.

    Returns:
        A WAV file: RIFF header, 16,000 Hz, 1 channel, signed 16-bit little-endian PCM; same
        duration as the input (to within one 20 ms Opus frame), or ``max_seconds`` when the
        input is longer.

    A note that decodes only in part (an Ogg file cut short, or with damaged pages:
    :func:`bot.chat.ogg.check_ogg`) is converted as far as it decodes, with a warning logged.

    Raises:
        AudioError: empty, too large, corrupt or undecodable audio, or ffmpeg missing.
    """
    start = time.perf_counter()
    segment = _decode(data, max_seconds)
    _warn_if_partial(data, len(segment) / 1000, max_seconds)
    segment = (
        segment.set_channels(TARGET_CHANNELS)
        .set_sample_width(TARGET_SAMPLE_WIDTH_BYTES)
        .set_frame_rate(TARGET_SAMPLE_RATE_HZ)
    )
    wav = _to_wav_bytes(segment)
    logger.debug(
        "transcode n_bytes_in=%d n_bytes_out=%d duration_s=%.2f took_ms=%.1f",
        len(data),
        len(wav),
        len(segment) / 1000,
        (time.perf_counter() - start) * 1000,
    )
    return wav


def _wav_info(wav: bytes) -> tuple[int, int, int, int]:
    """(sample_rate_hz, n_channels, sample_width_bytes, n_frames) from a WAV header.

    Raises:
        AudioError: not a readable PCM WAV.
    """
    try:
        with wave.open(io.BytesIO(wav), "rb") as w:
            return w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes()
    except (wave.Error, EOFError) as exc:
        raise AudioError(f"not a PCM WAV file ({len(wav)} bytes): {exc}") from exc


def audio_duration_s(data: bytes) -> float:
    """Duration of ``data`` in seconds.

    WAV is measured from its header (no decoding); anything else is decoded with ffmpeg.

    Raises:
        AudioError: empty, corrupt or undecodable audio.
    """
    if not data:
        raise AudioError("empty audio: 0 bytes received; send a voice note with speech in it")
    if data[:4] == b"RIFF":
        try:
            rate, _, _, n_frames = _wav_info(data)
            return n_frames / rate
        except AudioError:
            pass  # e.g. WAVE_FORMAT_EXTENSIBLE or float WAV: let ffmpeg read it
    return len(_decode(data)) / 1000


def _split_point_ms(
    segment: AudioSegment, window_end_ms: int, window_ms: int, thresh_dbfs: float
) -> int:
    """Where to end a chunk that may run to ``window_end_ms``: the middle of the longest pause in
    the last part of the window, else the window end itself."""
    search_start_ms = window_end_ms - int(window_ms * _SILENCE_SEARCH_FRACTION)
    tail = segment[search_start_ms:window_end_ms]
    silences = detect_silence(
        tail,
        min_silence_len=_MIN_SILENCE_MS,
        silence_thresh=thresh_dbfs,
        seek_step=_SILENCE_SEEK_STEP_MS,
    )
    if not silences:
        return window_end_ms
    # Prefer the longest pause; among equals, the latest one (bigger chunks, fewer requests).
    lo, hi = max(silences, key=lambda s: (s[1] - s[0], s[0]))
    return search_start_ms + (lo + hi) // 2


def split_wav(wav: bytes, max_seconds: float = DEFAULT_CHUNK_SECONDS) -> list[bytes]:
    """Split a WAV into chunks no longer than ``max_seconds``, cutting at pauses where it can.

    Each window of ``max_seconds`` is cut in the middle of the longest pause (>= 250 ms, 16 dB
    below the clip's average loudness) found in its last 40 %; with no pause there, it is cut at
    exactly ``max_seconds``. Audio no longer than ``max_seconds`` comes back as one chunk,
    unchanged.

    Args:
        wav: a PCM WAV file (normally the output of :func:`transcode_to_wav`).
        max_seconds: longest chunk in seconds, > 0 and at most :data:`SARVAM_MAX_SECONDS` for
            Sarvam's REST API.

    Returns:
        WAV files in order, same format as the input; their durations sum to the input's.

    Raises:
        AudioError: ``wav`` is empty or not a readable WAV.
        ValueError: ``max_seconds`` <= 0.
    """
    if max_seconds <= 0:
        raise ValueError(f"max_seconds of {max_seconds} must be > 0")
    if not wav:
        raise AudioError("empty audio: 0 bytes received; send a voice note with speech in it")
    rate, _, _, n_frames = _wav_info(wav)
    if n_frames / rate <= max_seconds:
        return [wav]
    segment = AudioSegment.from_wav(io.BytesIO(wav))
    window_ms = int(max_seconds * 1000)
    total_ms = len(segment)
    thresh_dbfs = segment.dBFS - _SILENCE_BELOW_AVERAGE_DB
    chunks: list[bytes] = []
    start_ms = 0
    while total_ms - start_ms > window_ms:
        end_ms = _split_point_ms(segment, start_ms + window_ms, window_ms, thresh_dbfs)
        chunks.append(_to_wav_bytes(segment[start_ms:end_ms]))
        start_ms = end_ms
    chunks.append(_to_wav_bytes(segment[start_ms:]))
    logger.debug(
        "split duration_s=%.2f n_chunks=%d max_seconds=%.1f",
        total_ms / 1000,
        len(chunks),
        max_seconds,
    )
    return chunks
