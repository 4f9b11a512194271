"""Measure the speech gate (``bot.chat.speech``) on real audio and print where its thresholds sit.

    python scripts/measure_speech_gate.py            # needs espeak-ng and ffmpeg

Every note goes the bot's way: OGG/Opus as Telegram sends it (24 kbit/s, 48 kHz) → ffmpeg via
``bot.chat.audio.transcode_to_wav`` → ``bot.chat.speech.measure_speech``. Notes: espeak-ng
questions in en/hi/gu/te, short fillers ("Yes.", "Thank you."), digital silence, white and pink
noise at -60..-20 dBFS, a question over -35 dBFS noise, a steady tone and a melody with pauses.
Prints one row per note and the statistics the constants in ``bot.chat.speech`` rest on.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.chat.audio import transcode_to_wav  # noqa: E402
from bot.chat.speech import (  # noqa: E402
    ABSOLUTE_FLOOR_DBFS,
    NOISE_PERCENTILE,
    RELATIVE_MARGIN_DB,
    TONAL_PEAK_SHARE,
    frame_levels,
    measure_speech,
    pcm_of_wav,
)
from standins.voice_notes import (  # noqa: E402
    NOISE_RATE_HZ,
    encode_note,
    make_voice_note,
    melody,
    pink_noise,
    speak_wav,
    tone,
    white_noise,
)

QUESTIONS = {
    "en": ["what is the capital of india", "how many calories are in a banana",
           "capital of India?"],
    "hi": ["भारत की राजधानी क्या है", "केले में कितनी कैलोरी होती है"],
    "gu": ["ગુજરાતની રાજધાની કઈ છે", "અમદાવાદની વસ્તી કેટલી છે"],
    "te": ["తెలంగాణ రాజధాని ఏది", "అరటిపండులో ఎన్ని కేలరీలు ఉంటాయి"],
}
FILLERS = {"en": ["Yes.", "Thank you.", "OK"], "hi": ["हाँ"]}


def speech_samples(text: str, lang: str) -> np.ndarray:
    """espeak-ng speech as float samples at 48 kHz."""
    samples, rate = pcm_of_wav(speak_wav(text, lang))
    n = int(len(samples) * NOISE_RATE_HZ / rate)
    return np.interp(np.arange(n) * rate / NOISE_RATE_HZ, np.arange(len(samples)), samples)


def notes() -> list[tuple[str, str, bytes]]:
    """(kind, name, OGG/Opus bytes)."""
    out = []
    for lang, texts in QUESTIONS.items():
        out += [("speech", f"{lang}: {text}", make_voice_note(text, lang)) for text in texts]
    for lang, texts in FILLERS.items():
        out += [("short", f"{lang}: {text}", make_voice_note(text, lang)) for text in texts]
    out.append(("silence", "digital silence 3 s", encode_note(np.zeros(3 * NOISE_RATE_HZ))))
    for dbfs in (-60, -45, -30, -20):
        out.append(("noise", f"white noise {dbfs} dBFS", encode_note(white_noise(3, dbfs))))
        out.append(("noise", f"pink noise {dbfs} dBFS", encode_note(pink_noise(3, dbfs))))
    speech = speech_samples("what is the capital of india", "en")
    noisy = speech + white_noise(len(speech) / NOISE_RATE_HZ, -35)
    out.append(("speech", "en question over -35 dBFS white noise", encode_note(noisy)))
    out.append(("tone", "440 Hz tone 3 s", encode_note(tone(3, 440))))
    out.append(("tone", "melody with pauses 3.6 s", encode_note(melody())))
    return out


def main() -> None:
    print(f"NOISE_PERCENTILE={NOISE_PERCENTILE} RELATIVE_MARGIN_DB={RELATIVE_MARGIN_DB} "
          f"ABSOLUTE_FLOOR_DBFS={ABSOLUTE_FLOOR_DBFS} TONAL_PEAK_SHARE={TONAL_PEAK_SHARE}\n")
    print(f"| {'note':44} | kind    | length s | speech s | floor dBFS | p90-p10 dB | "
          "max peak share (loud) | passes |")
    print("|" + "---|" * 8)
    speech_shares, noise_spreads, pause_fracs = [], [], []
    for kind, name, ogg in notes():
        wav = transcode_to_wav(ogg)
        measure = measure_speech(wav)
        samples, rate = pcm_of_wav(wav)
        levels, shares = frame_levels(samples, rate)
        loud = levels >= measure.threshold_dbfs
        spread = float(np.percentile(levels, 90) - np.percentile(levels, 10))
        max_share = float(shares[loud].max()) if loud.any() else 0.0
        if kind == "speech":
            speech_shares.append(shares[loud])
            pause_fracs.append(float(np.mean(levels < measure.noise_floor_dbfs + 6)))
        if kind == "noise":
            noise_spreads.append(spread)
        print(f"| {name:44} | {kind:7} | {measure.duration_s:8.2f} | {measure.speech_s:8.2f} | "
              f"{measure.noise_floor_dbfs:10.1f} | {spread:10.1f} | {max_share:21.2f} | "
              f"{'yes' if measure.has_question else 'no':6} |")
    shares = np.concatenate(speech_shares)
    print(f"\nspeech frames: peak share median {np.median(shares):.2f}, p99 "
          f"{np.percentile(shares, 99):.2f}, max {shares.max():.2f}")
    print(f"speech notes: frames within 6 dB of the floor (pauses) {min(pause_fracs):.0%}.."
          f"{max(pause_fracs):.0%}")
    print(f"noise notes: p90-p10 level spread {min(noise_spreads):.1f}.."
          f"{max(noise_spreads):.1f} dB")


if __name__ == "__main__":
    main()
