"""bot.chat.audio on real espeak-ng voice notes encoded as Telegram-style OGG/Opus."""

from __future__ import annotations

import io
import tracemalloc
import wave

import pytest

from bot.chat.audio import (
    MAX_AUDIO_BYTES,
    SARVAM_MAX_SECONDS,
    AudioError,
    audio_duration_s,
    ffmpeg_available,
    split_wav,
    transcode_to_wav,
)
from standins.voice_notes import (
    make_long_voice_note,
    make_voice_note,
    make_wav,
    sine_ogg,
    speak_wav,
    tools_available,
)

pytestmark = pytest.mark.skipif(not tools_available(), reason="needs espeak-ng and ffmpeg")

PHRASES = {
    "en": "what is the capital of india",
    "hi": "भारत की राजधानी क्या है",
    "gu": "ગુજરાતની રાજધાની કઈ છે",
    "te": "తెలంగాణ రాజధాని ఏది",
}


def _params(wav: bytes) -> tuple[int, int, int, float]:
    with wave.open(io.BytesIO(wav), "rb") as w:
        return (
            w.getframerate(),
            w.getnchannels(),
            w.getsampwidth(),
            w.getnframes() / w.getframerate(),
        )


def _espeak_duration_s(text: str, lang: str) -> float:
    raw = speak_wav(text, lang)
    with wave.open(io.BytesIO(raw), "rb") as w:  # header frame count is bogus on --stdout
        rate, frame_bytes = w.getframerate(), w.getnchannels() * w.getsampwidth()
        return len(w.readframes(10**9)) / frame_bytes / rate


def test_ffmpeg_is_available_here():
    assert ffmpeg_available()


@pytest.mark.parametrize("lang", sorted(PHRASES))
def test_transcode_real_voice_note_gives_16khz_mono_s16_wav_of_spoken_duration(lang):
    ogg = make_voice_note(PHRASES[lang], lang)
    assert ogg[:4] == b"OggS"

    wav = transcode_to_wav(ogg)

    rate, n_channels, width, duration_s = _params(wav)
    assert (rate, n_channels, width) == (16_000, 1, 2)
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE"
    assert duration_s == pytest.approx(_espeak_duration_s(PHRASES[lang], lang), abs=0.2)
    assert audio_duration_s(wav) == pytest.approx(duration_s, abs=1e-6)
    assert audio_duration_s(ogg) == pytest.approx(duration_s, abs=0.05)


def test_transcoded_voice_note_is_not_silent():
    wav = transcode_to_wav(make_voice_note(PHRASES["en"], "en"))
    from pydub import AudioSegment

    assert AudioSegment.from_wav(io.BytesIO(wav)).dBFS > -40


def test_corrupt_bytes_raise_audio_error_naming_the_byte_count():
    garbage = b"OggS" + bytes(range(256)) * 8

    with pytest.raises(AudioError, match=rf"could not decode {len(garbage)} bytes of audio"):
        transcode_to_wav(garbage)


def test_truncated_voice_note_raises_audio_error():
    ogg = make_voice_note(PHRASES["en"], "en")

    with pytest.raises(AudioError, match=r"could not decode \d+ bytes of audio"):
        transcode_to_wav(ogg[: len(ogg) // 2])


def test_empty_bytes_raise_audio_error_saying_empty():
    with pytest.raises(AudioError, match=r"empty audio: 0 bytes"):
        transcode_to_wav(b"")
    with pytest.raises(AudioError, match=r"empty audio"):
        audio_duration_s(b"")
    with pytest.raises(AudioError, match=r"empty audio"):
        split_wav(b"")


def test_audio_over_telegram_download_limit_is_refused_before_decoding():
    with pytest.raises(AudioError, match=r"over the 20 MB limit"):
        transcode_to_wav(b"\0" * (MAX_AUDIO_BYTES + 1))


@pytest.mark.slow  # ffmpeg encodes and decodes a long note
def test_transcode_decodes_no_more_than_max_seconds_of_a_long_small_file():
    ogg = sine_ogg(300)  # ~210 kB holding 5 minutes
    tracemalloc.start()
    try:
        wav = transcode_to_wav(ogg, max_seconds=11)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert _params(wav)[3] == pytest.approx(11, abs=0.05)
    # all 5 minutes decoded at Opus's 48 kHz would be 29 MB before any conversion
    assert peak_bytes < 10 * 2**20, f"peak {peak_bytes / 2**20:.1f} MB"


def test_transcode_cuts_a_wav_at_max_seconds():
    wav = transcode_to_wav(make_wav(5.0), max_seconds=2.5)

    assert _params(wav)[3] == pytest.approx(2.5, abs=0.001)


@pytest.mark.slow  # espeak-ng and ffmpeg make and split a 70 s note
def test_split_70s_note_gives_3_chunks_each_within_sarvam_limit():
    wav = transcode_to_wav(make_long_voice_note(70))
    assert _params(wav)[3] == pytest.approx(70, abs=0.05)

    chunks = split_wav(wav)

    durations = [_params(c)[3] for c in chunks]
    assert len(chunks) == 3
    assert all(d <= 29.0 for d in durations) and max(durations) < SARVAM_MAX_SECONDS
    assert sum(durations) == pytest.approx(70, abs=0.01)
    assert all(_params(c)[:3] == (16_000, 1, 2) for c in chunks)


@pytest.mark.slow  # espeak-ng and ffmpeg make and split a 70 s note
def test_split_cuts_long_speech_inside_pauses():
    from pydub import AudioSegment

    wav = transcode_to_wav(make_long_voice_note(70))
    chunks = split_wav(wav)

    for chunk in chunks[:-1]:
        tail = AudioSegment.from_wav(io.BytesIO(chunk))[-100:]
        head_of_next = AudioSegment.from_wav(io.BytesIO(chunks[chunks.index(chunk) + 1]))[:100]
        assert tail.dBFS < -40 and head_of_next.dBFS < -40  # inside the 0.6 s pause


def test_split_without_pauses_cuts_at_max_seconds():
    wav = make_wav(65, tone_hz=300)

    durations = [_params(c)[3] for c in split_wav(wav, max_seconds=29.0)]

    assert durations == pytest.approx([29.0, 29.0, 7.0], abs=0.001)


def test_split_returns_short_audio_unchanged_as_one_chunk():
    wav = make_wav(3.0)

    assert split_wav(wav) == [wav]


def test_split_rejects_non_positive_max_seconds():
    with pytest.raises(ValueError, match="max_seconds of 0 must be > 0"):
        split_wav(make_wav(1.0), max_seconds=0)


def test_transcode_resamples_a_44khz_stereo_wav():
    wav = transcode_to_wav(make_wav(2.0, sample_rate_hz=44_100, n_channels=2))

    rate, n_channels, width, duration_s = _params(wav)
    assert (rate, n_channels, width) == (16_000, 1, 2)
    assert duration_s == pytest.approx(2.0, abs=0.01)


def test_a_truncated_voice_note_that_decodes_in_part_logs_a_warning(caplog):
    """Issue 34: a note cut short (the last Ogg page incomplete) decodes to its readable part
    and was answered from it with nothing logged; now the decode says so, with the numbers."""
    ogg = make_voice_note("what is the capital of india and how much does an xbox cost", "en")
    cut = ogg[: int(len(ogg) * 0.9)]
    with caplog.at_level("WARNING", logger="bot.chat.audio"):
        wav = transcode_to_wav(cut)
    assert 0 < audio_duration_s(wav) < audio_duration_s(transcode_to_wav(ogg))
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "audio decoded in part" in warnings[0]
    assert f"n_bytes={len(cut)}" in warnings[0] and "the last page is cut" in warnings[0]


def test_a_whole_note_and_one_cut_at_max_seconds_log_no_warning(caplog):
    with caplog.at_level("WARNING", logger="bot.chat.audio"):
        transcode_to_wav(make_voice_note(PHRASES["hi"], "hi"))
        transcode_to_wav(sine_ogg(8), max_seconds=3)
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_ogg_damage_reads_the_pages_claim_and_garbage_after_them():
    from bot.chat.audio import ogg_damage

    ogg = sine_ogg(4)
    assert ogg_damage(ogg) == ("", pytest.approx(4.0, abs=0.03))
    damage, claimed_s = ogg_damage(ogg + b"\0" * 10)
    assert damage.startswith("10 bytes at offset") and claimed_s == pytest.approx(4.0, abs=0.03)
    assert ogg_damage(ogg[:20])[0].startswith("the last page is cut in its header")
