"""Property-based tests (Hypothesis) of the text and audio paths, issue 34.

Text: random Unicode across Devanagari, Gujarati, Telugu and Latin, emoji, CJK, combining and
zero-width marks, bidi controls, empty and very long (standins/random_input.py), through the
fake pipeline (fast) and the real one (slow): no exception escapes, every result is one of the
typed outcomes, and random text is never answered, confidently or hedged. Audio: a voice note's
OGG/Opus bytes mutated at random, through the transcode and the speech gate: nothing but
``AudioError`` escapes. How many examples: the Hypothesis profile (tests/conftest.py: "fast" by
default, "ci" with ``HYPOTHESIS_PROFILE=ci``); ``scripts/fuzz_text.py`` runs 10,000 through the
real pipeline and prints the counts (docs/benchmarks.md).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from bot.chat.audio import AudioError, transcode_to_wav
from bot.chat.speech import SpeechMeasure, measure_speech
from rag.types import Reason, ReasonCode, Result, Status
from standins.random_input import mutated_bytes, random_text
from standins.voice_notes import make_voice_note
from tests.conftest import needs_tools


def check_outcome(result: Result, query: str) -> None:
    """``result`` is one of the typed outcomes of ``query`` and not an answer."""
    assert isinstance(result, Result) and isinstance(result.status, Status)
    assert result.status is not Status.ERROR, result.message
    assert not result.shows_answer, (query, result.answer, result.trace.to_list())
    assert result.status.is_refusal and result.answer == ""
    assert isinstance(result.reason, Reason) and isinstance(result.reason.code, ReasonCode)
    assert result.lang in ("en", "hi", "gu", "te")
    assert result.trace.stages and result.trace.stages[0].name == "input_guard"


@given(query=random_text())
def test_random_text_is_refused_by_the_fake_pipeline_with_a_typed_reason(fake_pipeline, query):
    check_outcome(fake_pipeline.ask(query), query)


@given(query=random_text())
def test_random_text_with_a_given_language_is_refused_too(fake_pipeline, query):
    for lang in ("hi", "gu", "te", "en"):
        check_outcome(fake_pipeline.ask(query, lang=lang), query)


@pytest.mark.slow
@given(query=random_text())
def test_random_text_is_never_answered_by_the_real_pipeline(pipeline, query):
    check_outcome(pipeline.ask(query), query)


_BASE_NOTE: list[bytes] = []


def _base_note() -> bytes:
    """A real voice note (espeak-ng, OGG/Opus), made once."""
    if not _BASE_NOTE:
        _BASE_NOTE.append(make_voice_note("how much does an xbox 360 cost", "en"))
    return _BASE_NOTE[0]


@needs_tools("espeak-ng", "ffmpeg")
@hypothesis_settings(max_examples=max(8, hypothesis_settings.default.max_examples // 6))
@given(data=st.deferred(lambda: mutated_bytes(_base_note())))
def test_mutated_voice_notes_are_decoded_or_refused_never_crash(data):
    """Transcode (ffmpeg through pydub, at most 11 s decoded as the bot does) then the speech
    gate: a WAV and a measure, or ``AudioError``; any other exception fails."""
    try:
        wav = transcode_to_wav(data, max_seconds=11)
    except AudioError as exc:
        assert str(exc)
        return
    measure = measure_speech(wav)
    assert isinstance(measure, SpeechMeasure)
    assert 0 <= measure.speech_s <= measure.duration_s <= 11.1
