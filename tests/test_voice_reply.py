"""bot.chat.voice_reply and bot.chat.voice_cache without Telegram: what is spoken and when, the
OGG/Opus encoding checked with ffprobe, and the byte-capped cache."""

from __future__ import annotations

import io
import json
import math
import struct
import subprocess
import wave

import pytest

from bot.chat.types import Speech
from bot.chat.voice_cache import VoiceAudio, VoiceCache
from bot.chat.voice_reply import encode_voice_note, speech_for
from rag.types import Citation, Result, Status
from standins.voice_notes import speak_wav
from tests.conftest import needs_tools


def answered(answer: str, answer_lang: str = "hi") -> Result:
    return Result(Status.ANSWERED, "q", "hi", answer=answer, answer_lang=answer_lang,
                  citations=[Citation("hi-1-2", "hi", 0.91, "…")], top_score=0.91, floor=0.85)


def ffprobe(data: bytes, tmp_path) -> dict:
    """ffprobe's format and streams of ``data`` (from a file: a pipe has no duration)."""
    path = tmp_path / "probe.ogg"
    path.write_bytes(data)
    proc = subprocess.run(["ffprobe", "-v", "error", "-show_format", "-show_streams", "-of",
                           "json", str(path)], capture_output=True, check=True)
    return json.loads(proc.stdout)


def tone_wav(seconds: float, rate: int = 22_050) -> bytes:
    n = int(seconds * rate)
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(struct.pack(f"<{n}h", *(int(6000 * math.sin(i / 8)) for i in range(n))))
    return out.getvalue()


def test_answer_is_spoken_without_citation_marks_in_the_answers_language():
    result = answered("खीरे में 16 कैलोरी होती है [1]. स्रोत hi-1102432-5 देखें।", "en")
    assert speech_for(result, "hi", "auto", is_voice_question=True) == Speech(
        "खीरे में 16 कैलोरी होती है . स्रोत देखें।", "en")


def test_refusal_is_spoken_as_its_sentence_with_score_and_floor():
    result = Result(Status.REFUSED_NO_MATCH, "q", "en", top_score=0.779, floor=0.84)
    speech = speech_for(result, "en", "on", is_voice_question=False)
    assert speech == Speech("I could not find this in my sources: best match 0.779 is below the "
                            "floor 0.840.", "en")


@pytest.mark.parametrize(("mode", "is_voice", "expected"), [
    ("auto", True, True), ("auto", False, False), ("on", False, True), ("off", True, False)])
def test_voice_setting_decides_when_to_speak(mode, is_voice, expected):
    speech = speech_for(answered("जवाब।"), "hi", mode, is_voice_question=is_voice)
    assert (speech is not None) == expected


def test_errors_and_languages_not_spoken_here_get_no_voice_note():
    assert speech_for(Result(Status.ERROR, "q", "en"), "en", "on", is_voice_question=True) is None
    assert speech_for(answered("பதில்.", "ta"), "ta", "on", is_voice_question=True) is None


@needs_tools("espeak-ng", "ffmpeg")
def test_speech_is_encoded_as_ogg_opus_of_the_same_duration(tmp_path):
    wav = speak_wav("भारत की राजधानी नई दिल्ली है।", "hi")  # 22,050 Hz: Opus needs 48 kHz
    with wave.open(io.BytesIO(wav), "rb") as w:  # espeak-ng's header leaves n_frames open
        wav_s = len(w.readframes(2**31)) / w.getsampwidth() / w.getframerate()

    audio = encode_voice_note(wav)

    assert audio.ogg[:4] == b"OggS"
    info = ffprobe(audio.ogg, tmp_path)
    [stream] = info["streams"]
    assert (info["format"]["format_name"], stream["codec_name"], stream["channels"]) == (
        "ogg", "opus", 1)
    assert stream["sample_rate"] == "48000"
    assert float(info["format"]["duration"]) == pytest.approx(wav_s, abs=0.1)
    assert audio.duration_s == pytest.approx(wav_s, abs=0.01)
    assert len(audio.ogg) < 6000 * wav_s  # ~32 kbit/s


def test_broken_wav_is_an_audio_error():
    from bot.chat.audio import AudioError

    with pytest.raises(AudioError, match="could not encode"):
        encode_voice_note(b"RIFF\x00\x00\x00\x00WAVEnope")


def test_cache_evicts_least_recently_used_within_its_byte_cap():
    cache = VoiceCache(max_bytes=250)
    keys = [(f"answer {n}", "hi-IN", "shubh", "bulbul:v3") for n in range(3)]
    for key in keys[:2]:
        assert cache.put(key, VoiceAudio(b"x" * 100, 1.0))
    assert cache.get(keys[0]) is not None  # keys[1] is now the least recently used
    cache.put(keys[2], VoiceAudio(b"y" * 100, 1.0))
    assert cache.get(keys[1]) is None and cache.get(keys[0]) is not None
    assert cache.n_bytes == 200 and len(cache) == 2
    assert (cache.n_hits, cache.n_misses) == (2, 1)
    assert not cache.put(("huge", "hi-IN", "shubh", "bulbul:v3"), VoiceAudio(b"z" * 300, 3.0))
    assert cache.n_bytes == 200


def test_cache_of_zero_bytes_keeps_nothing():
    cache = VoiceCache(0)
    assert not cache.put(("a", "en-IN", "shubh", "bulbul:v3"), VoiceAudio(b"x", 0.1))
    assert cache.get(("a", "en-IN", "shubh", "bulbul:v3")) is None and len(cache) == 0


@needs_tools("ffmpeg")
def test_tone_wav_encodes_too():
    assert encode_voice_note(tone_wav(1.0)).duration_s == pytest.approx(1.0, abs=0.01)
