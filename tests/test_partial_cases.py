"""Issue 34's partial cases: joiners and bidi marks folded before embedding, no answer joined
across a danda, and a warning when audio decodes only in part. (The text scheme in
``meta.json`` is tested with the index, tests/test_index.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from rag.text import BIDI_CONTROLS, embedding_text, tokenize

KILOGRAM_GU = "એક કિલોગ્રામમાં કેટલા ગ્રામ હોય છે?"
KILOGRAM_GU_ZWNJ = "એક કિલોગ્\u200cરામમાં કેટલા ગ્રામ હોય છે?"


def test_embedding_text_drops_joiners_and_bidi_marks_as_the_tokens_do():
    assert embedding_text(KILOGRAM_GU_ZWNJ) == KILOGRAM_GU
    assert embedding_text("क्\u200dया \u200fxbox\u202b 360\u202c") == "क्या xbox 360"
    assert all(embedding_text(f"a{ch}b") == "ab" for ch in BIDI_CONTROLS)
    assert tokenize(KILOGRAM_GU_ZWNJ) == tokenize(KILOGRAM_GU)
    # one form (NFC) of a letter typed two ways: U+0958 QA is the letter KA and a nukta
    assert embedding_text("\u0958") == embedding_text("क\u093c") == "क\u093c"


def test_the_encoder_reads_a_word_with_a_zwnj_or_bidi_mark_as_the_word(encoder):
    plain, marked = encoder.encode_queries(
        [KILOGRAM_GU, KILOGRAM_GU_ZWNJ.replace("કેટલા", "\u200fકેટલા\u200e")])
    assert float(plain @ marked) == pytest.approx(1.0, abs=1e-5)
    passages = encoder.encode_passages([KILOGRAM_GU, KILOGRAM_GU_ZWNJ])
    assert float(passages[0] @ passages[1]) == pytest.approx(1.0, abs=1e-5)


def test_a_zwnj_typed_inside_a_word_does_not_move_the_score(pipeline):
    """The finding: "કિલો\u200cગ્રામ" scored 0.818 against 0.847 without the ZWNJ."""
    plain = pipeline.ask(KILOGRAM_GU)
    marked = pipeline.ask(KILOGRAM_GU_ZWNJ)
    assert marked.top_score == pytest.approx(plain.top_score, abs=1e-6)
    assert marked.status is plain.status
    assert np.isfinite(marked.top_score)


def test_no_candidate_sentence_is_joined_across_a_danda():
    """The finding: "यह हर प्री-वर्कआउट पाउडर ... मुख्य घटक है।" (55 characters, under
    MIN_SENTENCE_CHARS) was joined to the sentence before it and shown as one answer."""
    from rag.selection import MIN_SENTENCE_CHARS, sentences_of

    text = ("1. कैफीन (प्रति सर्विंग 100-300 मिलीग्राम) कैफीन ध्यान केंद्रित करने में मदद करता है "
            "और दर्द प्रतिक्रिया को कम करता है (1)। इसका मतलब है कि आप अधिक ऊर्जावान महसूस "
            "करेंगे और थकान महसूस करने से पहले खुद को और आगे बढ़ाने में सक्षम होंगे। यह हर "
            "प्री-वर्कआउट पाउडर और ऊर्जा पेय में मुख्य घटक है।")
    sentences = sentences_of(text)
    assert len(sentences) == 3 and len(sentences[-1]) < MIN_SENTENCE_CHARS
    assert all("। " not in s for s in sentences)
    assert sentences[0].startswith("1. कैफीन")  # "1." (no danda) still joins the next
    short_first = "छोटा वाक्य है। " + "यह दूसरा वाक्य काफी लंबा है और इसमें साठ से ज़्यादा अक्षर हैं।"
    assert sentences_of(short_first) == ["छोटा वाक्य है।", short_first.split("। ", 1)[1]]
    english = "Yes. A 250GB Xbox 360 will cost about $250 in most stores today."
    assert sentences_of(english) == [english]  # a short English sentence still joins the next
