"""Real voice notes for tests, demos (scripts/dev_bot.py, scripts/dev_whatsapp.py) and
measurements (scripts/measure_speech_gate.py): espeak-ng speech encoded as OGG/Opus the way
Telegram sends them, plus tones, noise and silence that are not speech.

``make_voice_note("what is the capital of india", "en")`` returns the bytes of a 48 kHz mono
Opus (24 kbit/s) OGG file. Results are cached by content in ``$TMPDIR/voice-rag-voice-notes``,
so a test session synthesises each phrase once.

Needs the Debian packages ``espeak-ng`` and ``ffmpeg`` (with libopus).
"""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import tempfile
import wave
from pathlib import Path

VOICES = {"en": "en", "hi": "hi", "gu": "gu", "te": "te"}
"""espeak-ng voice per corpus language."""

CACHE_DIR = Path(tempfile.gettempdir()) / "voice-rag-voice-notes"

_SENTENCES = {
    "en": "The quick brown fox jumps over the lazy dog near the river bank.",
    "hi": "भारत की राजधानी नई दिल्ली है और यह एक बड़ा शहर है।",
    "gu": "ગુજરાતની રાજધાની ગાંધીનગર છે.",
    "te": "తెలంగాణ రాజధాని హైదరాబాద్.",
}
_PAUSE_S = 0.6  # silence between repeated sentences in long notes


def tools_available() -> bool:
    """True when espeak-ng and ffmpeg are on PATH."""
    return shutil.which("espeak-ng") is not None and shutil.which("ffmpeg") is not None


def _cached(key: str, build) -> bytes:
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    path = CACHE_DIR / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.ogg"
    if not path.exists():
        data = build()
        tmp = path.with_suffix(f".{id(data)}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)  # atomic: parallel test runs never read half a file
    return path.read_bytes()


def speak_wav(text: str, lang: str) -> bytes:
    """espeak-ng speech as WAV bytes (22,050 Hz mono s16)."""
    if lang not in VOICES:
        raise ValueError(f"no espeak-ng voice for {lang!r}: expected one of {', '.join(VOICES)}")
    proc = subprocess.run(
        ["espeak-ng", "-v", VOICES[lang], "--stdout", text],
        capture_output=True,
        check=True,
        timeout=60,
    )
    return proc.stdout


def _encode_opus(wav: bytes) -> bytes:
    """WAV bytes -> OGG/Opus bytes with Telegram voice-note settings."""
    proc = subprocess.run(
        [
            "ffmpeg",
            "-hide_banner",
            "-loglevel",
            "error",
            "-f",
            "wav",
            "-i",
            "pipe:0",
            "-c:a",
            "libopus",
            "-b:a",
            "24k",
            "-ar",
            "48000",
            "-ac",
            "1",
            "-f",
            "ogg",
            "pipe:1",
        ],
        input=wav,
        capture_output=True,
        check=True,
        timeout=120,
    )
    return proc.stdout


def make_voice_note(text: str, lang: str) -> bytes:
    """OGG/Opus bytes of ``text`` spoken by espeak-ng's ``lang`` voice (en, hi, gu, te)."""
    return _cached(f"note|{lang}|{text}", lambda: _encode_opus(speak_wav(text, lang)))


def make_long_voice_note(seconds: float, lang: str = "en") -> bytes:
    """OGG/Opus bytes of exactly ``seconds`` of speech: one sentence repeated with 0.6 s pauses
    between repetitions (so a splitter has real silences to find), cut at ``seconds``."""

    def build() -> bytes:
        with wave.open(io.BytesIO(speak_wav(_SENTENCES[lang], lang)), "rb") as w:
            params = w.getparams()
            # espeak-ng --stdout writes 0x7FFFFFFF as the frame count: read what is there.
            speech = w.readframes(10**9)
        frame_bytes = params.nchannels * params.sampwidth
        pause = b"\x00" * (int(_PAUSE_S * params.framerate) * frame_bytes)
        n_bytes = int(seconds * params.framerate) * frame_bytes
        pcm = bytearray()
        while len(pcm) < n_bytes:
            pcm += speech + pause
        out = io.BytesIO()
        with wave.open(out, "wb") as w:
            w.setnchannels(params.nchannels)
            w.setsampwidth(params.sampwidth)
            w.setframerate(params.framerate)
            w.writeframes(bytes(pcm[:n_bytes]))
        return _encode_opus(out.getvalue())

    return _cached(f"long|{lang}|{seconds}", build)


def make_wav(
    seconds: float,
    sample_rate_hz: int = 16_000,
    n_channels: int = 1,
    sample_width_bytes: int = 2,
    tone_hz: float = 440.0,
) -> bytes:
    """A WAV file of a sine tone (fast, no subprocess), for tests that only need valid audio."""
    import math

    n_frames = int(seconds * sample_rate_hz)
    peak = 0.3 * (2 ** (8 * sample_width_bytes - 1) - 1)
    samples = bytearray()
    for i in range(n_frames):
        value = int(peak * math.sin(2 * math.pi * tone_hz * i / sample_rate_hz))
        frame = (
            value.to_bytes(sample_width_bytes, "little", signed=True)
            if sample_width_bytes > 1
            else bytes([value + 128])
        )
        samples += frame * n_channels
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(n_channels)
        w.setsampwidth(sample_width_bytes)
        w.setframerate(sample_rate_hz)
        w.writeframes(bytes(samples))
    return out.getvalue()


def sine_ogg(seconds: int) -> bytes:
    """A long, small OGG/Opus tone (8 kHz, 6 kbit/s: about 0.7 kB per second of audio)."""
    return subprocess.run(
        ["ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "lavfi",
         "-i", f"sine=frequency=440:duration={seconds}:sample_rate=8000",
         "-c:a", "libopus", "-b:a", "6k", "-ar", "8000", "-ac", "1", "-f", "ogg", "pipe:1"],
        capture_output=True, check=True, timeout=60,
    ).stdout


# ------------------------------------------------ not speech: silence, noise, tones (issue 14)
# Synthesised with numpy at 48 kHz and encoded like a voice note, for the speech gate
# (bot.chat.speech) and scripts/measure_speech_gate.py.

NOISE_RATE_HZ = 48_000


def pcm_wav(samples, rate_hz: int = NOISE_RATE_HZ) -> bytes:
    """float samples in [-1, 1] (numpy array) → 16-bit mono WAV bytes."""
    import numpy as np

    return wav_bytes(np.clip(np.asarray(samples) * 32767, -32768, 32767).astype("<i2").tobytes(),
                     rate_hz)


def wav_bytes(pcm16: bytes, rate_hz: int) -> bytes:
    """Little-endian 16-bit mono PCM → WAV file bytes at ``rate_hz`` (Hz)."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate_hz)
        w.writeframes(pcm16)
    return out.getvalue()


def _at_dbfs(samples, dbfs: float):
    import numpy as np

    return samples * (10 ** (dbfs / 20) / np.sqrt(np.mean(samples**2)))


def white_noise(seconds: float, dbfs: float, seed: int = 0):
    """White noise at an RMS level of ``dbfs``, float samples at 48 kHz."""
    import numpy as np

    return _at_dbfs(np.random.default_rng(seed).standard_normal(int(seconds * NOISE_RATE_HZ)),
                    dbfs)


def pink_noise(seconds: float, dbfs: float, seed: int = 1):
    """1/f noise (white noise with its spectrum shaped), float samples at 48 kHz."""
    import numpy as np

    n = int(seconds * NOISE_RATE_HZ)
    spectrum = np.fft.rfft(np.random.default_rng(seed).standard_normal(n))
    freqs = np.fft.rfftfreq(n, 1 / NOISE_RATE_HZ)
    spectrum[1:] /= np.sqrt(freqs[1:])
    return _at_dbfs(np.fft.irfft(spectrum, n), dbfs)


def tone(seconds: float, hz: float, dbfs: float = -12.0):
    import numpy as np

    t = np.arange(int(seconds * NOISE_RATE_HZ)) / NOISE_RATE_HZ
    return _at_dbfs(np.sin(2 * np.pi * hz * t), dbfs)


def melody():
    """C major scale, 0.3 s notes with 0.15 s pauses (3.6 s): music-like, with silences."""
    import numpy as np

    gap = np.zeros(int(0.15 * NOISE_RATE_HZ))
    notes = [tone(0.3, hz) for hz in (262, 294, 330, 349, 392, 440, 494, 523)]
    return np.concatenate([x for note in notes for x in (note, gap)])


def encode_note(samples) -> bytes:
    """float samples at 48 kHz → OGG/Opus bytes as Telegram sends a voice note."""
    return _encode_opus(pcm_wav(samples))


def speech_then_silence(text: str, lang: str, silence_s: float) -> bytes:
    """OGG/Opus of ``text`` spoken, then ``silence_s`` seconds of digital silence."""

    def build() -> bytes:
        with wave.open(io.BytesIO(speak_wav(text, lang)), "rb") as w:
            params = w.getparams()
            speech = w.readframes(10**9)
        pause = b"\x00" * (int(silence_s * params.framerate) * params.sampwidth)
        out = io.BytesIO()
        with wave.open(out, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(params.sampwidth)
            w.setframerate(params.framerate)
            w.writeframes(speech + pause)
        return _encode_opus(out.getvalue())

    return _cached(f"then-silence|{lang}|{text}|{silence_s}", build)
