"""Issue 34, "random text answered": no answer from a passage sharing no content word with the
question (rag.guards.check_lexical_support, the pipeline's ``lexical_guard`` stage), and a tie
between Indic scripts not broken towards a language (rag.language.script_tie)."""

from __future__ import annotations

import pytest

from rag.guards import check_lexical_support
from rag.language import detect_language, dominant_language, script_tie
from rag.types import ReasonCode, Status

# The finding's kind of input: 21 characters of Gujarati, Devanagari, CJK, Telugu and Latin
# with right-to-left and embedding marks (one word of each Indic script and one Latin word).
MIXED_21 = "\u200fવાત कल 漢字 నీరు abcd\u202b"


def test_the_mixed_input_is_21_characters_of_five_scripts_and_bidi_marks():
    assert len(MIXED_21) == 21
    assert {"\u200f", "\u202b"} <= set(MIXED_21)


def test_a_tie_between_indic_scripts_is_not_broken_towards_one():
    assert script_tie(MIXED_21) == ("te", "gu", "hi", "en")
    assert dominant_language(MIXED_21) is None
    assert detect_language(MIXED_21) == "en"  # the no-language default; the pipeline refuses


@pytest.mark.parametrize("text, lang", [
    ("Xbox 360 की कीमत क्या है", "hi"),  # Devanagari against Latin: the Indic script, as before
    ("what is the population of અમદાવાદ?", "en"),
    ("కిలో ఎంత", "te"),
])
def test_ties_with_latin_and_clear_majorities_are_unchanged(text, lang):
    assert script_tie(text) == ()
    assert detect_language(text) == lang


def test_the_mixed_input_is_refused_as_garbled_not_read_as_telugu(fake_pipeline):
    result = fake_pipeline.ask(MIXED_21)
    assert result.status is Status.REFUSED_BAD_INPUT
    assert result.reason.code is ReasonCode.GARBLED
    assert "tie" in result.reason.detail
    assert result.trace.get("language").decision == "undetermined"
    assert result.trace.get("embed") is None  # refused before the encoder


def test_a_given_language_decides_a_tie(fake_pipeline):
    result = fake_pipeline.ask(MIXED_21, lang="te")
    assert result.lang == "te"
    assert result.trace.get("language").decision == "te"
    assert not result.is_answered


def test_lexical_support_matches_words_not_letters():
    passage = "A 4GB Xbox 360 with Kinect costs about $250."
    supported = check_lexical_support("how much does a kinect cost", [passage])
    assert supported.is_supported and supported.matched == ("kinect", "cost")
    unsupported = check_lexical_support("oxbox okinect", [passage])
    assert not unsupported.is_supported and unsupported.n_content == 2
    assert "none of the question's 2 content words" in unsupported.detail
    only_stopwords = check_lexical_support("what is the", [passage])
    assert not only_stopwords.is_supported and only_stopwords.n_content == 0


def test_lexical_support_reads_indic_words_with_joiners_and_native_digits():
    passage = "एक किलोग्राम में 1000 ग्राम होते हैं।"
    assert check_lexical_support("किलो\u200dग्राम", [passage]).is_supported
    assert check_lexical_support("१००० क्या", [passage]).matched == ("1000",)


def test_a_passage_sharing_letters_but_no_word_is_not_shown_as_the_answer(fake_pipeline):
    """"oxbox okinect" shares character trigrams with the Xbox passage, enough for the fake
    encoder's cosine to clear the floor (0.268 >= 0.25), and not one word: refused by the
    lexical guard with the score and floor, never answered."""
    result = fake_pipeline.ask("oxbox okinect")
    assert result.status is Status.REFUSED_UNANSWERABLE
    assert result.reason.code is ReasonCode.NO_SHARED_WORDS
    assert result.top_score >= result.floor
    assert result.trace.get("lexical_guard").decision == "refused"
    assert result.answer == ""


def test_answered_questions_pass_the_lexical_guard(fake_pipeline):
    result = fake_pipeline.ask("how much does an xbox 360 cost")
    assert result.is_answered
    guard = result.trace.get("lexical_guard")
    assert guard.decision == "passed" and "xbox" in guard.detail


def test_a_lone_letter_is_not_a_shared_word():
    """Two of 10,000 random strings ("ౄ\u200cકs", ";/\u200dc ̊ત乳ત\u202d") were answered
    because their lone Latin letter matched the "s" of "it's" or the "c" of "°C"."""
    passage = "It's 3 eggs at 40 °C, and that's all."
    assert not check_lexical_support("ౄ\u200cકs", [passage]).is_supported
    assert not check_lexical_support(";/\u200dc \u030aત乳ત\u202d", [passage]).is_supported
    assert check_lexical_support("how many eggs", [passage]).matched == ("eggs",)
    assert check_lexical_support("40 degrees", [passage]).matched == ("40",)
    assert not check_lexical_support("Ba", ["The Brewers Association (BA) of 2015"]).is_supported
