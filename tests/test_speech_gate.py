"""The speech gate (``bot.chat.speech``) on real audio: espeak-ng questions pass; digital silence,
white and pink noise, a steady tone, a melody and one-word notes are refused before any
speech-to-text call, in the user's language, logged and shown by /why; a filler-only transcript
of a mostly silent note is refused after it."""
# ruff: noqa: F811  (the bot fixtures are imported from tests.test_bot_telegram)

from __future__ import annotations

import numpy as np
import pytest

from bot.chat.audio import transcode_to_wav
from bot.chat.speech import MIN_SPEECH_S, is_filler_only, measure_speech
from standins.sarvam import Reply
from standins.voice_notes import (
    NOISE_RATE_HZ,
    encode_note,
    make_voice_note,
    melody,
    pink_noise,
    speech_then_silence,
    tone,
    white_noise,
)
from tests.conftest import needs_tools
from tests.test_bot_telegram import (  # noqa: F401  (fixtures)
    CHAT,
    bot,
    bot_settings,
    last_decision,
    replies,
)

pytestmark = needs_tools("espeak-ng", "ffmpeg")

QUESTIONS = [("what is the capital of india", "en"), ("capital of India?", "en"),
             ("भारत की राजधानी क्या है", "hi"), ("ગુજરાતની રાજધાની કઈ છે", "gu"),
             ("తెలంగాణ రాజధాని ఏది", "te")]
NOT_SPEECH = {
    "silence": lambda: encode_note(np.zeros(3 * NOISE_RATE_HZ)),
    "white-noise-60dB": lambda: encode_note(white_noise(3, -60)),
    "white-noise-30dB": lambda: encode_note(white_noise(3, -30)),
    "pink-noise-45dB": lambda: encode_note(pink_noise(3, -45)),
    "pink-noise-20dB": lambda: encode_note(pink_noise(3, -20)),
    "tone-440Hz": lambda: encode_note(tone(3, 440)),
    "melody": lambda: encode_note(melody()),
    "yes": lambda: make_voice_note("Yes.", "en"),
    "haan": lambda: make_voice_note("हाँ", "hi"),
}


@pytest.mark.parametrize(("text", "lang"), QUESTIONS, ids=[q[1] + str(i) for i, q in
                                                           enumerate(QUESTIONS)])
def test_spoken_questions_pass_the_speech_gate(text, lang):
    measure = measure_speech(transcode_to_wav(make_voice_note(text, lang)))
    assert measure.has_question, measure.describe()


def test_a_question_spoken_over_background_noise_passes():
    from bot.chat.speech import pcm_of_wav
    from standins.voice_notes import speak_wav

    samples, rate = pcm_of_wav(speak_wav("what is the capital of india", "en"))
    speech = np.interp(np.arange(int(len(samples) * NOISE_RATE_HZ / rate)) * rate / NOISE_RATE_HZ,
                       np.arange(len(samples)), samples)
    noisy = speech + white_noise(len(speech) / NOISE_RATE_HZ, -35)
    assert measure_speech(transcode_to_wav(encode_note(noisy))).has_question


@pytest.mark.parametrize("make", NOT_SPEECH.values(), ids=NOT_SPEECH.keys())
def test_silence_noise_tones_and_one_word_are_no_question(make):
    measure = measure_speech(transcode_to_wav(make()))
    assert not measure.has_question, measure.describe()
    assert measure.speech_s < MIN_SPEECH_S


@pytest.mark.parametrize(("transcript", "is_filler"), [
    ("Thank you.", True), ("  yes!! ", True), ("हाँ।", True), ("ధన్యవాదాలు", True),
    ("Thank you, what is the capital of India?", False), ("yes bank share price", False)])
def test_filler_only_transcripts(transcript, is_filler):
    assert is_filler_only(transcript) is is_filler


async def test_noise_note_gets_could_not_hear_a_question_without_a_sarvam_call(
        bot, tg, sarvam, bot_settings):
    await tg.push_voice(CHAT, encode_note(pink_noise(3, -30)), duration_s=3)
    [reply] = await replies(tg)
    assert reply.startswith("I could not hear a question in this voice note.")
    assert not sarvam.calls
    stored = await last_decision(bot_settings)
    assert stored.result.status == "refused-bad-input"
    assert stored.result.trace.get("speech_gate").decision == "refused"
    await tg.push_text(CHAT, "/why")
    [why] = await replies(tg)
    assert "speech_gate — refused: speech 0.00 s of 3.00 s (min 0.50 s)" in why


async def test_short_note_from_a_hindi_user_is_refused_in_hindi(bot, tg, sarvam):
    await tg.push_voice(CHAT, make_voice_note("हाँ", "hi"), duration_s=1, language_code="hi")
    [reply] = await replies(tg)
    assert reply.startswith("इस वॉइस नोट में मुझे कोई सवाल सुनाई नहीं दिया।")
    assert not sarvam.calls


async def test_filler_transcript_of_a_mostly_silent_note_is_refused(
        bot, tg, sarvam, bot_settings):
    sarvam.enqueue(Reply("Thank you."))
    await tg.push_voice(CHAT, speech_then_silence("Thank you.", "en", 2.0), duration_s=3)
    [reply] = await replies(tg)
    assert reply.startswith("I could not hear a question in this voice note.")
    assert len(sarvam.calls) == 1
    stored = await last_decision(bot_settings)
    assert stored.transcript == "Thank you."
    assert "filler-only transcript" in stored.result.message
