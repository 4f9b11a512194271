import pytest

from rag.language import detect_language, dominant_language, normalise_language
from rag.text import content_tokens, excerpt, split_sentences, tokenize


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("How much does an Xbox 360 cost?", "en"),
        ("भारत के प्रधानमंत्री कौन हैं?", "hi"),
        ("ગુજરાતની રાજધાની કઈ છે?", "gu"),
        ("తెలంగాణ రాజధాని ఏది?", "te"),
        ("Xbox 360 की कीमत कितनी है?", "hi"),
        ("12345 ???", "en"),
        ("", "en"),
    ],
)
def test_detects_language_from_majority_script(text, lang):
    assert detect_language(text) == lang


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("On average an Xbox 360 costs $80 to $250 (कीमत).", "en"),
        ("Xbox 360 की कीमत लगभग $200 है।", "hi"),
        ("PlayStation 4 Pro ની કિંમત કેટલી છે?", "gu"),
        ("12345 😀", None),
    ],
)
def test_dominant_language_counts_latin_letters_too(text, lang):
    assert dominant_language(text) == lang


def test_detects_language_of_real_corpus_passages(sample_passages):
    for p in sample_passages[::50]:
        assert detect_language(p.text) == p.lang, p.id


@pytest.mark.parametrize(("code", "lang"), [("hi-IN", "hi"), ("en-IN", "en"), ("te", "te"),
                                             ("gu_IN", "gu"), ("unknown", None), (None, None)])
def test_normalises_speech_language_codes(code, lang):
    assert normalise_language(code) == lang


def test_unsupported_language_code_is_an_error():
    with pytest.raises(ValueError, match="ta-IN"):
        normalise_language("ta-IN")


def test_tokenizer_keeps_matras_and_drops_danda():
    assert tokenize("किताब की कीमत है।") == ["किताब", "की", "कीमत", "है"]
    assert tokenize("ప్రాచీనమైనది భాష") == ["ప్రాచీనమైనది", "భాష"]
    assert tokenize("ગુજરાતી ભાષા") == ["ગુજરાતી", "ભાષા"]


def test_sentences_end_at_danda_and_full_stop():
    text = "पहला वाक्य है। दूसरा वाक्य है॥ Third one. Fourth?"
    assert split_sentences(text) == ["पहला वाक्य है।", "दूसरा वाक्य है॥", "Third one.", "Fourth?"]


def test_excerpt_is_cut_at_a_word_to_at_most_200_chars():
    short = excerpt("word " * 100)
    assert len(short) <= 201 and short.endswith("word…")
    assert excerpt("  a   short\ntext ") == "a short text"


def test_content_tokens_drop_question_words_in_each_language():
    assert content_tokens("how much does an xbox cost") == ["xbox", "cost"]
    assert content_tokens("भारत के प्रधानमंत्री कौन हैं", "hi") == ["भारत", "प्रधानमंत्री"]
