"""bot.chat.audio on real espeak-ng voice notes encoded as Telegram-style OGG/Opus."""

from __future__ import annotations

import io
import re
import time
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
from bot.chat.ogg import check_ogg, opus_packet_samples
from standins.voice_notes import (
    make_long_voice_note,
    make_voice_note,
    make_wav,
    sine_ogg,
    speak_wav,
)
from tests.conftest import needs_tools

pytestmark = needs_tools("espeak-ng", "ffmpeg")

LONG_PHRASE = "what is the capital of india and how much does an xbox cost"
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
    and was answered from it with nothing logged; now the decode says so, with the numbers.
    Issue 41: the numbers are the pages' claim only because their granule positions are
    plausible, and then the claim is the whole note's length."""
    ogg = make_voice_note(LONG_PHRASE, "en")
    cut = ogg[: int(len(ogg) * 0.9)]
    with caplog.at_level("WARNING", logger="bot.chat.audio"):
        wav = transcode_to_wav(cut)
    whole_s = audio_duration_s(transcode_to_wav(ogg))
    assert 0 < audio_duration_s(wav) < whole_s
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "audio decoded in part" in warnings[0]
    assert f"n_bytes={len(cut)}" in warnings[0] and "the last page is cut" in warnings[0]
    decoded_s, claimed_s = map(float, re.search(
        r"decoded_s=([\d.]+) of the ([\d.]+) s its pages claim", warnings[0]).groups())
    assert decoded_s == pytest.approx(audio_duration_s(wav), abs=0.01)
    assert claimed_s == pytest.approx(whole_s, abs=0.03)


def test_a_truncated_note_with_a_hostile_granule_says_it_was_cut_without_durations(caplog):
    """Issue 41: a cut note whose page claims 2**40 samples (a CRC-valid header: what a hostile
    file can send) logged "decoded_s=2.99 of the 22906492.24 s its pages claim"; now it says the
    note was cut, which page's header is not believed and why, and states no duration."""
    ogg = make_voice_note(LONG_PHRASE, "en")
    offset = ogg_pages(ogg)[3][0]
    cut = with_granule(ogg, 3, 2**40)[: int(len(ogg) * 0.9)]
    with caplog.at_level("WARNING", logger="bot.chat.audio"):
        wav = transcode_to_wav(cut)
    assert audio_duration_s(wav) > 0  # still converted as far as it decodes
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warning.startswith(f"audio decoded in part: n_bytes={len(cut)}; the note was cut")
    assert "the last page is cut" in warning and "no duration stated" in warning
    assert f"the granule position of the page at offset {offset} does not follow" in warning
    assert "decoded_s" not in warning and not re.search(r"\d s\b", warning), warning


def test_a_whole_note_with_a_hostile_granule_is_logged_without_durations(caplog):
    """Not cut, but one page claims 2**40 samples: logged as implausible headers, never as a
    265-day note decoded in part."""
    ogg = make_voice_note(LONG_PHRASE, "en")
    with caplog.at_level("WARNING", logger="bot.chat.audio"):
        wav = transcode_to_wav(with_granule(ogg, 3, 2**40))
    assert audio_duration_s(wav) == pytest.approx(audio_duration_s(transcode_to_wav(ogg)),
                                                   abs=0.03)
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warning.startswith("audio page headers implausible:")
    assert "no duration stated" in warning and "decoded in part" not in warning
    assert not re.search(r"\d s\b", warning), warning


def test_a_whole_note_and_one_cut_at_max_seconds_log_no_warning(caplog):
    with caplog.at_level("WARNING", logger="bot.chat.audio"):
        transcode_to_wav(make_voice_note(PHRASES["hi"], "hi"))
        transcode_to_wav(sine_ogg(8), max_seconds=3)
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_check_ogg_reads_the_pages_claim_and_garbage_after_them():
    ogg = sine_ogg(4)
    assert check_ogg(ogg) == ("", pytest.approx(4.0, abs=0.03), "", True)
    damage, claimed_s, implausible, _ = check_ogg(ogg + b"\0" * 10)
    assert damage.startswith("10 bytes at offset") and claimed_s == pytest.approx(4.0, abs=0.03)
    assert implausible == ""
    assert check_ogg(ogg[:20]).damage.startswith("the last page is cut in its header")


@pytest.mark.parametrize("lang", sorted(PHRASES))
def test_real_voice_notes_have_plausible_pages_whole_and_cut(lang):
    """The plausibility rules (RFC 7845 section 4) hold for what ffmpeg's libopus writes, so a
    real note, whole or cut anywhere, never loses its numbers to them."""
    ogg = make_voice_note(PHRASES[lang], lang)
    assert check_ogg(ogg).implausible == ""
    whole_s = check_ogg(ogg).claimed_s
    assert whole_s == pytest.approx(audio_duration_s(transcode_to_wav(ogg)), abs=0.03)
    for n_bytes in range(200, len(ogg), 97):
        check = check_ogg(ogg[:n_bytes])
        assert check.damage and check.implausible == "", (n_bytes, check)
        assert check.claimed_s is None or check.claimed_s <= whole_s + 0.001


@pytest.mark.parametrize(("granule", "why"), [
    (2**40, "does not follow from the packets that complete on it"),
    (-5, "is missing though packets complete on it"),
    ("+960", "does not follow from the packets that complete on it"),  # one 20 ms packet more
    ("-960", "does not follow from the packets that complete on it"),
])
def test_a_granule_position_its_packets_do_not_explain_is_implausible(granule, why):
    ogg = make_voice_note(LONG_PHRASE, "en")
    offset, _ = ogg_pages(ogg)[3]
    if isinstance(granule, str):
        granule = int.from_bytes(ogg[offset + 6:offset + 14], "little") + int(granule)
    check = check_ogg(with_granule(ogg, 3, granule))
    assert check.claimed_s is None
    assert check.implausible == f"the granule position of the page at offset {offset} {why} " \
        "(RFC 7845 4)"


def test_damage_past_the_decoding_limit_is_not_a_partial_decode(caplog):
    """A 40 s note cut at 36 s, decoded to 10 s on purpose (``max_seconds``): the pages are
    walked only as far as the decoder reads, and nothing is logged."""
    ogg = sine_ogg(40)
    cut = ogg[: int(len(ogg) * 0.9)]
    check = check_ogg(cut, max_seconds=10)
    assert (check.damage, check.implausible, check.is_whole) == ("", "", False)
    assert 10 <= check.claimed_s < 12
    assert check_ogg(cut).damage.startswith("the last page is cut")
    with caplog.at_level("WARNING", logger="bot.chat.audio"):
        transcode_to_wav(cut, max_seconds=10)
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_checking_20_mb_of_tiny_packets_stops_at_the_decoding_limit():
    """The walk is one step per packet (at least 2.5 ms of sound each): 20 MB of one-byte
    packets (24,896 s claimed, 8.4 million packets) is checked only as far as the decoder
    reads (61 s: 24,400 packets), in well under a second."""
    head = b"OpusHead" + bytes([1, 1]) + (312).to_bytes(2, "little") + bytes(7)
    data = fake_page(0, [head], flags=2) + fake_page(0, [b"OpusTags" + bytes(8)])
    packets = [bytes([16 << 3])] * 255  # CELT 2.5 ms, code 0: 120 samples each
    n_pages = (MAX_AUDIO_BYTES - len(data)) // len(fake_page(0, packets))
    data += b"".join(fake_page((i + 1) * 255 * 120, packets) for i in range(n_pages))
    start = time.perf_counter()
    check = check_ogg(data, max_seconds=61)
    took_s = time.perf_counter() - start
    assert (check.damage, check.implausible, check.is_whole) == ("", "", False)
    assert 61 <= check.claimed_s < 62 and took_s < 1.0, took_s


def fake_page(granule: int, packets: list[bytes], flags: int = 0) -> bytes:
    """One Ogg page (RFC 3533) of ``packets``, each under 255 bytes, CRC left 0 (check_ogg
    does not read it)."""
    table = bytes(len(packet) for packet in packets)
    return (b"OggS" + bytes([0, flags]) + granule.to_bytes(8, "little", signed=True)
            + b"\1\0\0\0" + bytes(8) + bytes([len(table)]) + table + b"".join(packets))


@pytest.mark.parametrize(("packet", "samples"), [
    (bytes([31 << 3 | 0]), 960),              # CELT 20 ms, one frame
    (bytes([16 << 3 | 1, 0]), 240),           # CELT 2.5 ms, two frames
    (bytes([9 << 3 | 2]), 1920),              # SILK wideband 20 ms, two frames
    (bytes([9 << 3 | 3, 3]), 2880),           # code 3: three 20 ms frames
    (bytes([3 << 3 | 3, 2]), 5760),           # two 60 ms frames: the 120 ms limit
    (bytes([3 << 3 | 3, 3]), None),           # 180 ms: over the limit
    (bytes([9 << 3 | 3, 0]), None),           # code 3 with no frames
    (bytes([9 << 3 | 3]), None),              # code 3 without its count byte
    (b"", None),                              # an empty packet
])
def test_opus_packet_samples_from_the_toc(packet, samples):
    assert opus_packet_samples(packet) == samples


def ogg_pages(ogg: bytes) -> list[tuple[int, int]]:
    """(offset, size) of each whole Ogg page of ``ogg`` (RFC 3533 section 6)."""
    pos, pages = 0, []
    while pos + 27 <= len(ogg) and ogg[pos:pos + 4] == b"OggS":
        n_segments = ogg[pos + 26]
        size = 27 + n_segments + sum(ogg[pos + 27:pos + 27 + n_segments])
        pages.append((pos, size))
        pos += size
    return pages


def with_granule(ogg: bytes, index: int, granule: int) -> bytes:
    """``ogg`` with page ``index``'s granule position set to ``granule`` and its CRC made right
    again, as a hostile file would be: nothing but the granule is wrong."""
    offset, size = ogg_pages(ogg)[index]
    page = bytearray(ogg[offset:offset + size])
    page[6:14] = granule.to_bytes(8, "little", signed=True)
    page[22:26] = bytes(4)
    page[22:26] = ogg_crc(page).to_bytes(4, "little")
    return ogg[:offset] + bytes(page) + ogg[offset + size:]


def ogg_crc(page: bytes) -> int:
    """The Ogg page checksum (RFC 3533 section 6: CRC-32, polynomial 0x04c11db7, initial value
    0, no final XOR, computed with the CRC field zeroed)."""
    crc = 0
    for byte in page:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7 if crc & 0x80000000 else crc << 1) & 0xFFFFFFFF
    return crc


def test_ogg_crc_matches_the_crc_ffmpeg_wrote():
    ogg = make_voice_note(PHRASES["en"], "en")
    for offset, size in ogg_pages(ogg):
        page = bytearray(ogg[offset:offset + size])
        written, page[22:26] = bytes(page[22:26]), bytes(4)
        assert ogg_crc(page).to_bytes(4, "little") == written
