"""clients.tts against the Sarvam stand-in on 127.0.0.1: real WAV speech (espeak-ng) over real HTTP,
retries, deadlines, long text split at sentence ends and joined, bad audio refused."""

from __future__ import annotations

import dataclasses
import io
import re
import wave

import pytest

from clients.stt import SarvamSettings
from clients.tts import SarvamTTS, SarvamTTSSettings, split_for_speech, tts_language_code
from rag.errors import ServiceError
from standins.sarvam import Reply, SarvamStandin
from tests.conftest import needs_tools

KEY = "tts-key"
HINDI = "भारत की राजधानी नई दिल्ली है। यह एक बड़ा शहर है।"


def long_text(n_chars: int) -> str:
    """English sentences (each ~90 characters, ending in '.') adding up to ``n_chars``."""
    sentence = "The Xbox 360 launched in 2005 and its price fell several times over the years. "
    return (sentence * (n_chars // len(sentence) + 1))[:n_chars].rsplit(" ", 1)[0] + "."


def wav_info(wav: bytes) -> tuple[int, int, int, float]:
    with wave.open(io.BytesIO(wav), "rb") as w:
        return (w.getframerate(), w.getnchannels(), w.getsampwidth(),
                w.getnframes() / w.getframerate())


@pytest.fixture
async def sarvam():
    async with SarvamStandin(api_key=KEY) as standin:
        yield standin


@pytest.fixture
def settings(sarvam) -> tuple[SarvamSettings, SarvamTTSSettings]:
    return (SarvamSettings(api_key=KEY, base_url=sarvam.base_url),
            SarvamTTSSettings(timeout_s=5.0, backoff_base_s=0.01))


@pytest.fixture
async def tts(settings):
    async with SarvamTTS(*settings) as client:
        yield client


@needs_tools("espeak-ng")
async def test_hindi_answer_is_spoken_as_one_wav_of_plausible_length(sarvam, tts):
    speech = await tts.synthesize(HINDI, "hi")

    [call] = sarvam.tts_calls
    assert call.headers["api-subscription-key"] == KEY
    assert call.body == {"text": HINDI, "target_language_code": "hi-IN", "model": "bulbul:v3",
                         "speaker": "shubh", "speech_sample_rate": 24000}
    rate, n_channels, width, duration_s = wav_info(speech.wav)
    assert (rate, n_channels, width) == (24000, 1, 2) == (speech.sample_rate_hz, 1, 2)
    assert duration_s == pytest.approx(call.duration_s) == pytest.approx(speech.duration_s,
                                                                          abs=0.001)
    assert 2.0 < duration_s < 10.0  # two short sentences
    assert (speech.n_parts, speech.n_attempts) == (1, 1)
    assert speech.request_ids[0].startswith("standin-")


async def test_3000_character_answer_is_split_at_sentence_ends_and_joined(sarvam, tts):
    text = long_text(3000)

    speech = await tts.synthesize(text, "en")

    assert speech.n_parts == len(sarvam.tts_calls) == 2
    sent = [c.body["text"] for c in sarvam.tts_calls]
    assert all(len(t) <= 2500 and t.endswith(".") for t in sent)
    assert " ".join(sent) == " ".join(text.split())
    assert wav_info(speech.wav)[3] == pytest.approx(sum(c.duration_s for c in sarvam.tts_calls))


def test_split_keeps_sentences_whole_and_cuts_only_overlong_ones():
    assert split_for_speech(HINDI, 40) == ["भारत की राजधानी नई दिल्ली है।", "यह एक बड़ा शहर है।"]
    assert split_for_speech(HINDI, 2500) == [HINDI]
    assert split_for_speech("one two three four five. six.", 10) == [
        "one two", "three four", "five. six."]
    assert split_for_speech("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]
    assert split_for_speech("  \n ", 10) == []
    parts = split_for_speech(long_text(6000), 2500)
    assert len(parts) == 3 and all(len(p) <= 2500 and p.endswith(".") for p in parts)


def test_language_codes():
    assert [tts_language_code(x) for x in ("en", "hi", "gu", "te", "ta-IN")] == [
        "en-IN", "hi-IN", "gu-IN", "te-IN", "ta-IN"]
    with pytest.raises(ValueError, match="'fr'"):
        tts_language_code("fr")


async def test_server_error_is_retried_then_succeeds(sarvam, tts):
    sarvam.enqueue_tts(Reply.error(503))

    speech = await tts.synthesize("Hello there.", "en")

    assert [c.status for c in sarvam.tts_calls] == [503, 200]
    assert speech.n_attempts == 2


async def test_500_on_every_attempt_raises_server_error(sarvam, tts):
    sarvam.enqueue_tts(Reply.error(500, "boom"), Reply.error(500, "boom"))

    with pytest.raises(ServiceError) as err:
        await tts.synthesize("Hello there.", "en")

    assert (err.value.service, err.value.reason) == ("sarvam_tts", "server_error")
    assert "boom" in err.value.detail and "2 attempt(s)" in err.value.detail


async def test_429_with_long_retry_after_fails_at_once(sarvam, tts):
    sarvam.enqueue_tts(Reply.error(429, retry_after=60))

    with pytest.raises(ServiceError) as err:
        await tts.synthesize("Hello there.", "en")

    assert err.value.reason == "rate_limited" and "SARVAM_TTS_RETRY_AFTER_MAX_S" in err.value.detail
    assert len(sarvam.tts_calls) == 1


async def test_slow_answer_times_out_per_request(sarvam, settings):
    sarvam.enqueue_tts(Reply(delay_s=2.0), Reply(delay_s=2.0))
    sarvam_settings, tts_settings = settings

    async with SarvamTTS(sarvam_settings,
                         dataclasses.replace(tts_settings, timeout_s=0.2)) as tts:
        with pytest.raises(ServiceError) as err:
            await tts.synthesize("Hello there.", "en")

    assert err.value.reason == "timeout"
    assert re.search(r"after 0\.2 s; 2 attempt\(s\)", err.value.detail)


async def test_whole_reply_has_one_deadline(sarvam, settings):
    sarvam.enqueue_tts(Reply(delay_s=0.3), Reply(delay_s=0.3), Reply(delay_s=0.3))
    sarvam_settings, tts_settings = settings
    tight = dataclasses.replace(tts_settings, total_timeout_s=0.5, max_chars=100)

    async with SarvamTTS(sarvam_settings, tight) as tts:
        with pytest.raises(ServiceError) as err:
            await tts.synthesize(long_text(300), "en")

    assert err.value.reason == "timeout"
    assert re.search(r"^1 of [34] part\(s\) synthesised in 0\.5 s", err.value.detail)
    assert "SARVAM_TTS_TOTAL_TIMEOUT_S" in err.value.detail


@pytest.mark.parametrize(("body", "match"), [
    ({"audios": ["bm90IGF1ZGlv"]}, "not a PCM WAV"),
    ({"audios": ["%%%"]}, "not base64"),
    ({"audios": []}, "no list of base64 'audios'"),
    ({"request_id": "x"}, "no list of base64 'audios'"),
    ("<html>oops</html>", "not JSON"),
], ids=["not-wav", "not-base64", "empty", "missing", "html"])
async def test_bad_audio_is_malformed_and_not_retried(sarvam, tts, body, match):
    sarvam.enqueue_tts(Reply(body=body))

    with pytest.raises(ServiceError, match=match) as err:
        await tts.synthesize("Hello there.", "en")

    assert err.value.reason == "malformed" and len(sarvam.tts_calls) == 1


async def test_wrong_or_missing_key_is_unauthorized(sarvam):
    for key in ("wrong", ""):
        async with SarvamTTS(SarvamSettings(api_key=key, base_url=sarvam.base_url),
                             SarvamTTSSettings()) as tts:
            with pytest.raises(ServiceError, match="SARVAM_API_KEY") as err:
                await tts.synthesize("Hello.", "en")
        assert err.value.reason == "unauthorized"
    assert [c.status for c in sarvam.tts_calls] == [403]  # no request without a key


async def test_standin_refuses_text_over_the_model_limit(sarvam, settings):
    sarvam_settings, tts_settings = settings
    async with SarvamTTS(sarvam_settings, dataclasses.replace(tts_settings,
                                                              max_chars=3000)) as tts:
        with pytest.raises(ServiceError, match="at most 2500") as err:
            await tts.synthesize(long_text(2800), "en")
    assert err.value.reason == "bad_request"


def test_settings_from_environment_name_the_variable():
    settings = SarvamTTSSettings.from_env({"SARVAM_TTS_MODEL": "bulbul:v2",
                                           "SARVAM_TTS_SPEAKER": "anushka",
                                           "SARVAM_TTS_CACHE_MB": "0"})
    assert (settings.model, settings.speaker, settings.cache_mb) == ("bulbul:v2", "anushka", 0)
    with pytest.raises(ValueError, match="SARVAM_TTS_MAX_CHARS must be at least 50"):
        SarvamTTSSettings.from_env({"SARVAM_TTS_MAX_CHARS": "10"})
