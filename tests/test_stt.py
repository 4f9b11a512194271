"""clients.stt.SarvamSTT over real HTTP against the Sarvam stand-in on 127.0.0.1."""

from __future__ import annotations

import dataclasses
import re
import time

import httpx
import pytest

from clients.stt import SarvamSettings, SarvamSTT, Transcript, sarvam_language_code
from rag.errors import ServiceError
from standins.sarvam import Reply, SarvamStandin, audio_key
from standins.voice_notes import make_wav
from tests.conftest import needs_tools

KEY = "test-subscription-key"


@pytest.fixture
async def sarvam():
    async with SarvamStandin(api_key=KEY) as standin:
        yield standin


@pytest.fixture
def settings(sarvam) -> SarvamSettings:
    # Short backoff so retry tests take milliseconds, not seconds.
    return SarvamSettings(
        api_key=KEY,
        base_url=sarvam.base_url,
        timeout_s=5.0,
        max_attempts=3,
        backoff_base_s=0.01,
        backoff_max_s=0.05,
    )


@pytest.fixture
async def stt(settings):
    async with SarvamSTT(settings) as client:
        yield client


@pytest.fixture(scope="module")
def wav() -> bytes:
    return make_wav(1.0)


@needs_tools("espeak-ng", "ffmpeg")
async def test_returns_transcript_and_language_and_sends_key_model_language_code(sarvam, stt):
    from bot.chat.audio import transcode_to_wav
    from standins.voice_notes import make_voice_note

    voice_wav = transcode_to_wav(make_voice_note("भारत की राजधानी क्या है", "hi"))
    sarvam.add_transcript(voice_wav, "भारत की राजधानी क्या है", "hi-IN", 0.97)

    result = await stt.transcribe(voice_wav)

    assert isinstance(result, Transcript)
    assert result.text == "भारत की राजधानी क्या है"
    assert (result.language, result.raw_language_code) == ("hi", "hi-IN")
    assert result.language_probability == pytest.approx(0.97)
    assert result.request_id and result.n_attempts == 1 and result.elapsed_ms > 0
    [call] = sarvam.calls
    assert call.headers["api-subscription-key"] == KEY
    assert call.form == {"model": "saaras:v3", "language_code": "unknown"}
    assert (call.filename, call.content_type) == ("audio.wav", "audio/wav")
    assert call.sample_rate_hz == 16_000 and call.n_channels == 1
    assert call.duration_s == pytest.approx(2.0, abs=0.5)


async def test_explicit_language_is_sent_as_sarvam_code(sarvam, stt, wav):
    sarvam.enqueue(Reply(transcript="ગુજરાતની રાજધાની", language_code="gu-IN"))

    result = await stt.transcribe(wav, language="gu")

    assert sarvam.calls[0].form["language_code"] == "gu-IN"
    assert result.language == "gu"


def test_language_codes_map_to_sarvam_codes():
    assert [sarvam_language_code(x) for x in (None, "auto", "unknown", "te", "hi-IN")] == [
        "unknown",
        "unknown",
        "unknown",
        "te-IN",
        "hi-IN",
    ]


async def test_retries_after_500_then_succeeds(sarvam, stt, wav):
    sarvam.enqueue(Reply.error(500), Reply(transcript="hello", language_code="en-IN"))

    result = await stt.transcribe(wav)

    assert result.text == "hello" and result.language == "en"
    assert result.n_attempts == 2
    assert [c.status for c in sarvam.calls] == [500, 200]


async def test_three_500s_raise_server_error_after_three_attempts(sarvam, stt, wav):
    sarvam.enqueue(*[Reply.error(500, "boom")] * 3, Reply(transcript="never reached"))

    with pytest.raises(ServiceError) as err:
        await stt.transcribe(wav)

    assert (err.value.service, err.value.reason) == ("sarvam", "server_error")
    assert "HTTP 500" in err.value.detail and "boom" in err.value.detail
    assert "3 attempt(s)" in err.value.detail
    assert len(sarvam.calls) == 3 and sarvam.n_pending == 1


async def test_slow_answer_beyond_client_timeout_raises_timeout(sarvam, settings, wav):
    sarvam.enqueue(*[Reply(transcript="late", delay_s=2.0)] * 3)
    fast = dataclasses.replace(settings, timeout_s=0.2)

    start = time.perf_counter()
    async with SarvamSTT(fast) as stt:
        with pytest.raises(ServiceError) as err:
            await stt.transcribe(wav)
    elapsed_s = time.perf_counter() - start

    assert err.value.reason == "timeout"
    assert "0.2 s" in err.value.detail
    assert len(sarvam.calls) == 0  # every attempt was abandoned before the stand-in answered
    assert sarvam.n_pending == 0  # ... but all three were made
    assert elapsed_s < 1.5


async def test_timeout_then_success_is_retried(sarvam, settings, wav):
    sarvam.enqueue(Reply(transcript="late", delay_s=2.0), Reply(transcript="on time"))

    async with SarvamSTT(dataclasses.replace(settings, timeout_s=0.3)) as stt:
        result = await stt.transcribe(wav)

    assert result.text == "on time" and result.n_attempts == 2


@pytest.mark.slow  # waits out Retry-After: 1 s
async def test_429_waits_for_retry_after_then_succeeds(sarvam, stt, wav):
    sarvam.enqueue(Reply.error(429, "slow down", retry_after=1), Reply(transcript="ok"))

    start = time.perf_counter()
    result = await stt.transcribe(wav)
    elapsed_s = time.perf_counter() - start

    assert result.text == "ok" and result.n_attempts == 2
    assert elapsed_s >= 1.0  # the 1 s Retry-After, not the 10 ms backoff
    assert elapsed_s < 3.0


async def test_429_with_retry_after_beyond_cap_fails_at_once_as_rate_limited(sarvam, stt, wav):
    sarvam.enqueue(Reply.error(429, "quota", retry_after=120), Reply(transcript="unused"))

    with pytest.raises(ServiceError) as err:
        await stt.transcribe(wav)

    assert err.value.reason == "rate_limited"
    assert "Retry-After 120 s exceeds 10 s" in err.value.detail
    assert len(sarvam.calls) == 1


async def test_persistent_429_raises_rate_limited(sarvam, stt, wav):
    sarvam.enqueue(*[Reply.error(429)] * 3)

    with pytest.raises(ServiceError) as err:
        await stt.transcribe(wav)

    assert err.value.reason == "rate_limited" and len(sarvam.calls) == 3


async def test_wrong_key_is_403_and_raises_unauthorized_without_retry(sarvam, settings, wav):
    async with SarvamSTT(dataclasses.replace(settings, api_key="wrong")) as stt:
        with pytest.raises(ServiceError) as err:
            await stt.transcribe(wav)

    assert err.value.reason == "unauthorized"
    assert "HTTP 403" in err.value.detail and "SARVAM_API_KEY" in err.value.detail
    assert [c.status for c in sarvam.calls] == [403]


async def test_missing_key_raises_unauthorized_without_a_request(sarvam, settings, wav):
    async with SarvamSTT(dataclasses.replace(settings, api_key="")) as stt:
        with pytest.raises(ServiceError, match="unauthorized") as err:
            await stt.transcribe(wav)

    assert "set SARVAM_API_KEY" in err.value.detail and sarvam.calls == []


async def test_unsupported_language_code_gives_language_none_and_keeps_raw_code(sarvam, stt, wav):
    sarvam.enqueue(Reply(transcript="தமிழ்நாட்டின் தலைநகரம்", language_code="ta-IN"))

    result = await stt.transcribe(wav)

    assert result.language is None and result.raw_language_code == "ta-IN"
    assert result.text == "தமிழ்நாட்டின் தலைநகரம்"


async def test_control_chars_and_lone_surrogates_in_transcript_are_dropped(sarvam, stt, wav):
    sarvam.enqueue(Reply(transcript="Xbox\x00 360\x1b[2J cost?\n\ud800", language_code="en-IN"))

    result = await stt.transcribe(wav)

    assert result.text == "Xbox 360 [2J cost?"
    assert result.language == "en"


@pytest.mark.parametrize("code", [7, ["hi-IN"], {"code": "hi-IN"}, True],
                         ids=["int", "list", "dict", "bool"])
async def test_language_code_or_request_id_that_is_not_a_string_counts_as_missing(
        sarvam, stt, wav, code):
    body = {"transcript": "Xbox 360 cost?", "language_code": code, "request_id": 12}
    sarvam.enqueue(Reply(body=body), Reply(body=body))

    result = await stt.transcribe_long([wav, wav])

    assert result.text == "Xbox 360 cost? Xbox 360 cost?"
    assert (result.language, result.raw_language_code, result.request_id) == (None, None, None)


async def test_wav_that_is_not_16khz_mono_is_a_bad_request_without_retry(sarvam, stt):
    with pytest.raises(ServiceError) as err:
        await stt.transcribe(make_wav(1.0, sample_rate_hz=8_000))

    assert err.value.reason == "bad_request"
    assert "expected 16000 Hz mono 16-bit WAV, got 8000 Hz" in err.value.detail
    assert len(sarvam.calls) == 1


async def test_audio_over_30s_is_a_bad_request(sarvam, stt):
    with pytest.raises(ServiceError, match="bad_request") as err:
        await stt.transcribe(make_wav(31.0))

    assert "at most 30 s" in err.value.detail
    assert sarvam.calls[0].duration_s == pytest.approx(31.0)


async def test_non_json_200_raises_malformed(sarvam, stt, wav):
    sarvam.enqueue(Reply(body="<html>gateway</html>"))

    with pytest.raises(ServiceError) as err:
        await stt.transcribe(wav)

    assert err.value.reason == "malformed" and "not JSON" in err.value.detail


async def test_json_without_transcript_raises_malformed(sarvam, stt, wav):
    sarvam.enqueue(Reply(body={"request_id": "x"}))

    with pytest.raises(ServiceError, match="malformed"):
        await stt.transcribe(wav)


async def test_connection_refused_raises_network_after_retries(settings, wav):
    async with SarvamStandin(api_key=KEY) as gone:
        dead_url = gone.base_url  # a port that was free, now closed

    async with SarvamSTT(dataclasses.replace(settings, base_url=dead_url)) as stt:
        with pytest.raises(ServiceError) as err:
            await stt.transcribe(wav)

    assert err.value.reason == "network" and "3 attempt(s)" in err.value.detail


async def test_transcribe_long_joins_chunks_in_order_with_majority_language(sarvam, stt, wav):
    sarvam.enqueue(
        Reply(transcript="पहला हिस्सा", language_code="hi-IN"),
        Reply(transcript="", language_code=None),
        Reply(transcript="दूसरा हिस्सा", language_code="hi-IN"),
    )

    result = await stt.transcribe_long([wav, wav, wav])

    assert result.text == "पहला हिस्सा दूसरा हिस्सा"
    assert (result.language, result.raw_language_code) == ("hi", "hi-IN")
    assert result.n_attempts == 3 and len(result.request_id.split(",")) == 3


@pytest.mark.slow  # runs into a 1.5 s deadline
async def test_transcribe_long_gives_up_at_the_whole_note_deadline_as_timeout(
        sarvam, settings, wav):
    sarvam.enqueue(*[Reply(transcript="slow part", delay_s=0.6)] * 5)
    limited = dataclasses.replace(settings, timeout_s=1.0, total_timeout_s=1.5)

    start = time.perf_counter()
    async with SarvamSTT(limited) as stt:
        with pytest.raises(ServiceError) as err:
            await stt.transcribe_long([wav] * 5)
    elapsed_s = time.perf_counter() - start

    assert (err.value.service, err.value.reason) == ("sarvam", "timeout")
    assert "of 5 chunk(s) transcribed in 1.5 s" in err.value.detail
    assert "SARVAM_TOTAL_TIMEOUT_S" in err.value.detail
    assert elapsed_s >= 1.5  # not given up before the deadline
    # Requests of 0.6 s start at 0, 0.6 and 1.2 s: a deadline at 1.5 s stops a 4th (1.8 s), so
    # at most 3 were sent and at most 2 finished -- counted, not timed on a noisy machine.
    assert len(sarvam.calls) <= 3
    assert int(re.search(r"(\d+) of 5 chunk", err.value.detail).group(1)) <= 2


async def test_whole_note_deadline_of_0_means_no_limit(sarvam, settings, wav):
    sarvam.enqueue(*[Reply(transcript="part", delay_s=0.2)] * 3)

    async with SarvamSTT(dataclasses.replace(settings, total_timeout_s=0)) as stt:
        result = await stt.transcribe_long([wav] * 3)

    assert result.text == "part part part"


async def test_transcribe_long_of_no_chunks_is_a_value_error(stt):
    with pytest.raises(ValueError, match="no audio chunks"):
        await stt.transcribe_long([])


async def test_standin_default_answers_from_transcripts_by_audio_key(wav):
    transcripts = {
        audio_key(wav): {"transcript": "tone", "language_code": "en-IN"},
        "default": "anything else",
    }
    async with SarvamStandin(api_key=KEY, transcripts=transcripts) as sarvam:
        async with SarvamSTT(SarvamSettings(api_key=KEY, base_url=sarvam.base_url)) as stt:
            known = await stt.transcribe(wav)
            other = await stt.transcribe(make_wav(1.0, tone_hz=900))

    assert (known.text, known.language) == ("tone", "en")
    assert other.text == "anything else"


def test_settings_read_from_sarvam_env_vars():
    env = {
        "SARVAM_API_KEY": "abc",
        "SARVAM_BASE_URL": "http://127.0.0.1:8090",
        "SARVAM_TIMEOUT_S": "7.5",
        "SARVAM_MAX_ATTEMPTS": "2",
        "SARVAM_TOTAL_TIMEOUT_S": "45",
    }

    s = SarvamSettings.from_env(env)

    assert s.total_timeout_s == 45.0
    assert SarvamSettings().total_timeout_s == 30.0

    assert (s.api_key, s.base_url, s.timeout_s, s.max_attempts, s.model) == (
        "abc",
        "http://127.0.0.1:8090",
        7.5,
        2,
        "saaras:v3",
    )


async def test_client_accepts_a_custom_transport():
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/speech-to-text"
        return httpx.Response(
            200, json={"request_id": "m", "transcript": " hi ", "language_code": "en-IN"}
        )

    settings = SarvamSettings(api_key="k", base_url="http://sarvam.test")
    async with SarvamSTT(settings, transport=httpx.MockTransport(handler)) as stt:
        result = await stt.transcribe(make_wav(0.5))

    assert result.text == "hi" and result.language == "en"
