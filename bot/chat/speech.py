"""The speech gate: how much of a decoded voice note is speech, measured before speech-to-text.

Energy-based voice activity with numpy on the 16 kHz mono WAV that
``bot.chat.audio.transcode_to_wav`` makes. The note is cut into 20 ms frames; a frame is speech
when it is

1. loud: its RMS level (dBFS) is at least ``RELATIVE_MARGIN_DB`` above the note's own noise
   floor (the ``NOISE_PERCENTILE``-th percentile of its frame levels) and above
   ``ABSOLUTE_FLOOR_DBFS``, so steady background noise, hiss and digital silence never count,
   however loud; and
2. not a pure tone: less than ``TONAL_PEAK_SHARE`` of its spectral energy sits in the main lobe
   around its strongest frequency (±``TONAL_PEAK_HALF_BINS`` FFT bins), so beeps and melodies
   played with pauses do not count.

Every constant was measured on real audio by ``scripts/measure_speech_gate.py`` (espeak-ng
notes in en/hi/gu/te encoded as Telegram's OGG/Opus, digital silence, white and pink noise
from -60 to -20 dBFS, steady tones and a melody); docs/benchmarks.md, "Speech gate", has the
table and where each constant sits in it. Pure functions, no I/O: call from handlers with
``asyncio.to_thread``.
"""

from __future__ import annotations

import io
import wave
from dataclasses import dataclass

import numpy as np

FRAME_MS = 20
"""Analysis frame in milliseconds: one Opus frame, the usual 10-30 ms of energy VADs."""
NOISE_PERCENTILE = 10.0
"""Percentile of frame levels taken as the note's noise floor: pauses between words (frames
within 6 dB of the floor) make up more than a tenth of the frames of every measured espeak-ng
question, so this percentile is the room, not the voice (docs/benchmarks.md, "Speech gate")."""
RELATIVE_MARGIN_DB = 12.0
"""How far above the noise floor a speech frame is, dB. Steady noise and tones stay within a
few dB of their own floor (the p90-p10 spread of frame levels, for white and pink noise at any
level and for a tone), while the speech notes spread over tens of dB, a question spoken over
-35 dBFS white noise too (docs/benchmarks.md, "Speech gate")."""
ABSOLUTE_FLOOR_DBFS = -50.0
"""No frame quieter than this is speech, dBFS: the quietest speech frame of the measured notes
is just above it (docs/benchmarks.md, "Speech gate"), while noise at -60 dBFS (a phone's idle
hiss) must never count however it fluctuates."""
TONAL_PEAK_HALF_BINS = 1
TONAL_PEAK_SHARE = 0.9
"""A frame that holds at least 90 % of its energy within ±1 FFT bin (bins 50 Hz apart with 20 ms
frames) of its strongest bin is a tone: the steady frames of a sine hold all of it there (its
Hann-window main lobe), while loud espeak-ng speech frames stay well below (the harmonics of a
voice spread the energy). Only the frames where a tone starts or stops fall below 90 %
(docs/benchmarks.md, "Speech gate")."""
MIN_SPEECH_S = 0.5
"""Less speech than this (seconds) is not a question (the issue's "~0.5 s"): the espeak-ng notes
"Yes.", "OK" and "हाँ" measure less, the shortest question ("capital of India?") and a question
over -35 dBFS noise more (docs/benchmarks.md, "Speech gate")."""
MOSTLY_SILENT_FRACTION = 0.5
"""A note with speech in less than half of its length is "mostly silent": a filler-only
transcript of such a note is refused (see ``is_filler_only``)."""


@dataclass(frozen=True, slots=True)
class SpeechMeasure:
    """What the gate measured: ``duration_s`` and ``speech_s`` in seconds, the note's
    ``noise_floor_dbfs`` and the ``threshold_dbfs`` a speech frame had to reach, and how many
    loud frames were refused as tones (``n_tonal_frames``)."""

    duration_s: float
    speech_s: float
    noise_floor_dbfs: float
    threshold_dbfs: float
    n_tonal_frames: int

    @property
    def speech_fraction(self) -> float:
        """Share of the note that is speech, 0..1 (0 for an empty note)."""
        return self.speech_s / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def has_question(self) -> bool:
        """At least ``MIN_SPEECH_S`` of speech."""
        return self.speech_s >= MIN_SPEECH_S

    @property
    def is_mostly_silent(self) -> bool:
        return self.speech_fraction < MOSTLY_SILENT_FRACTION

    def describe(self) -> str:
        """For the trace and /why: ``"speech 0.24 s of 3.00 s (min 0.50 s); floor -61.3 dBFS,
        threshold -49.3 dBFS; 0 tonal frames"``."""
        return (f"speech {self.speech_s:.2f} s of {self.duration_s:.2f} s (min "
                f"{MIN_SPEECH_S:.2f} s); floor {self.noise_floor_dbfs:.1f} dBFS, threshold "
                f"{self.threshold_dbfs:.1f} dBFS; {self.n_tonal_frames} tonal frames")


def pcm_of_wav(wav: bytes) -> tuple[np.ndarray, int]:
    """Samples of a 16-bit PCM WAV as float32 in [-1, 1), channels averaged, shape (n,), and
    its sample rate in Hz. Raises ValueError when it is not 16-bit PCM WAV."""
    try:
        with wave.open(io.BytesIO(wav), "rb") as w:
            rate, n_channels, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
            raw = w.readframes(w.getnframes())
    except (wave.Error, EOFError) as exc:
        raise ValueError(f"not a PCM WAV file ({len(wav)} bytes): {exc}") from exc
    if width != 2:
        raise ValueError(f"expected 16-bit PCM, got {8 * width}-bit")
    samples = np.frombuffer(raw[: len(raw) // (2 * n_channels) * 2 * n_channels], "<i2")
    samples = samples.reshape(-1, n_channels).mean(axis=1, dtype=np.float32) / 32768.0
    return samples.astype(np.float32), rate


def frame_levels(samples: np.ndarray, rate_hz: int) -> tuple[np.ndarray, np.ndarray]:
    """Per 20 ms frame: RMS level in dBFS (floored at -100) and the share of spectral energy
    within ±``TONAL_PEAK_HALF_BINS`` bins of its strongest bin (0..1). Both shape (n_frames,),
    float64."""
    frame = max(1, rate_hz * FRAME_MS // 1000)
    n_frames = len(samples) // frame
    if n_frames == 0:
        return np.zeros(0), np.zeros(0)
    frames = samples[: n_frames * frame].reshape(n_frames, frame).astype(np.float64)
    rms = np.sqrt(np.mean(frames**2, axis=1))
    level_dbfs = 20 * np.log10(np.maximum(rms, 1e-5))
    power = np.abs(np.fft.rfft(frames * np.hanning(frame), axis=1)) ** 2
    total = power.sum(axis=1)
    peak_bin = power.argmax(axis=1)
    is_near_peak = np.abs(np.arange(power.shape[1])[None, :] - peak_bin[:, None]) \
        <= TONAL_PEAK_HALF_BINS
    top = (power * is_near_peak).sum(axis=1)
    peak_share = np.divide(top, total, out=np.zeros_like(total), where=total > 0)
    return level_dbfs, peak_share


def measure_speech(wav: bytes) -> SpeechMeasure:
    """Seconds of speech in a 16-bit PCM WAV (any rate, channels averaged).

    Raises:
        ValueError: not a 16-bit PCM WAV.
    """
    samples, rate = pcm_of_wav(wav)
    level_dbfs, peak_share = frame_levels(samples, rate)
    duration_s = len(samples) / rate if rate else 0.0
    if len(level_dbfs) == 0:
        return SpeechMeasure(duration_s, 0.0, -100.0, ABSOLUTE_FLOOR_DBFS, 0)
    floor_dbfs = float(np.percentile(level_dbfs, NOISE_PERCENTILE))
    threshold_dbfs = max(ABSOLUTE_FLOOR_DBFS, floor_dbfs + RELATIVE_MARGIN_DB)
    is_loud = level_dbfs >= threshold_dbfs
    is_tonal = peak_share >= TONAL_PEAK_SHARE
    n_speech = int(np.count_nonzero(is_loud & ~is_tonal))
    return SpeechMeasure(duration_s, n_speech * FRAME_MS / 1000, floor_dbfs, threshold_dbfs,
                         int(np.count_nonzero(is_loud & is_tonal)))


FILLER_PHRASES: frozenset[str] = frozenset({
    # what speech-to-text models hear in noise and silence (Whisper-style hallucinations reported
    # for silent clips, and the "Thank you." / "Yes."), in the four corpus languages
    "thank you", "thanks", "thank you very much", "thanks for watching", "yes", "no", "okay",
    "ok", "hmm", "hm", "uh", "um", "ah", "oh", "bye", "hello", "hi", "you",
    "धन्यवाद", "शुक्रिया", "हाँ", "हां", "नहीं", "ठीक है", "हम्म", "नमस्ते",
    "આભાર", "હા", "ના", "બરાબર", "નમસ્તે",
    "ధన్యవాదాలు", "అవును", "కాదు", "సరే", "నమస్తే",
})
"""Transcripts that, alone, are no question (compared without case and punctuation)."""


def is_filler_only(transcript: str) -> bool:
    """Whether ``transcript`` is nothing but one of ``FILLER_PHRASES`` ("Thank you.", "हाँ")."""
    words = "".join(ch if ch.isalnum() or ch.isspace() or _is_mark(ch) else " "
                    for ch in transcript.casefold()).split()
    return " ".join(words) in FILLER_PHRASES


def _is_mark(ch: str) -> bool:
    import unicodedata

    return unicodedata.category(ch).startswith("M")  # Indic vowel signs are combining marks
