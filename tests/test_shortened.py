"""Issue 34: an answer cut to fit says so, in the text reply and in the voice note, in the
user's language (bot.chat.limits bounds it; bot.chat.render and bot.chat.voice_reply say it)."""

from __future__ import annotations

import pytest

from bot.chat.limits import MAX_ANSWER_CHARS, MAX_SPEECH_CHARS, bound_answer
from bot.chat.messages import t
from bot.chat.render import render_result_text
from bot.chat.voice_reply import speech_for
from rag.types import Citation, Result, Status

SENTENCES = {
    "en": "An Xbox 360 of 250 GB cost about 250 dollars in 2010 number {n}.",
    "hi": "250 जीबी वाले एक्सबॉक्स 360 की कीमत 2010 में लगभग 250 डॉलर थी, क्रम {n}।",
    "gu": "250 જીબીના એક્સબોક્સ 360ની કિંમત 2010માં આશરે 250 ડોલર હતી, ક્રમ {n}.",
    "te": "250 జీబీ ఎక్స్‌బాక్స్ 360 ధర 2010లో సుమారు 250 డాలర్లు, క్రమం {n}.",
}


def _answered(lang: str, n_sentences: int) -> Result:
    text = " ".join(SENTENCES[lang].format(n=n) for n in range(n_sentences))
    return Result(Status.ANSWERED, "question", lang, answer=text, answer_lang=lang,
                  mode="generative", top_score=0.9, floor=0.8,
                  citations=[Citation(f"{lang}-1-0", lang, 0.9, "excerpt")])


@pytest.mark.parametrize("lang", ["en", "hi", "gu", "te"])
def test_a_generated_answer_cut_to_fit_says_so_in_text_and_voice(lang):
    result = bound_answer(_answered(lang, 40))
    assert len(result.answer) <= MAX_ANSWER_CHARS
    text = render_result_text(result, lang)
    assert t("answer_shortened", lang) in text
    speech = speech_for(result, lang, "on", is_voice_question=False)
    assert speech.text.endswith(t("answer_shortened_spoken", lang))
    assert len(speech.text) <= MAX_SPEECH_CHARS and speech.lang == lang


def test_an_answer_too_long_only_to_speak_is_said_shortened_in_the_voice_note_only():
    result = bound_answer(_answered("hi", 11))
    assert MAX_SPEECH_CHARS < len(result.answer) <= MAX_ANSWER_CHARS
    assert t("answer_shortened", "hi") not in render_result_text(result, "hi")
    speech = speech_for(result, "hi", "on", is_voice_question=False)
    assert speech.text.endswith(t("answer_shortened_spoken", "hi"))
    assert len(speech.text) <= MAX_SPEECH_CHARS


def test_an_answer_that_fits_says_nothing_about_length():
    result = bound_answer(_answered("en", 2))
    assert t("answer_shortened", "en") not in render_result_text(result, "en")
    speech = speech_for(result, "en", "on", is_voice_question=False)
    assert t("answer_shortened_spoken", "en") not in speech.text
    assert speech.text == result.answer
