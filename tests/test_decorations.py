"""Decorations do not decide (issue 42): emoji, HTML tags, Markdown and the punctuation a
question ends with are removed from what the encoder, BM25, the readers and the gate read
(``rag.text.undecorated``), so they never change a question's outcome; the reply and the log
keep the user's text."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag.text import clean_query, undecorated

EMOJI = ("🍵", "😊", "👍🏽", "❤️", "👨\u200d👩\u200d👧", "🇮🇳", "1️⃣", "✨", "🤔🤔")
TAGS = (("<b>", "</b>"), ("<i>", "</i>"), ("<span class='x'>", "</span>"), ("**", "**"),
        ("_", "_"), ("`", "`"))
ENDINGS = ("?", "??", "?!", "!!!", "...", " ?", "।", "?!?!", "…")


@pytest.mark.parametrize(("decorated", "plain"), [
    ("Green tea में caffeine कितना होता है? 🍵😊", "Green tea में caffeine कितना होता है"),
    ("<b>Green tea</b> में caffeine कितना होता है??!", "Green tea में caffeine कितना होता है"),
    ("How much does an **Xbox 360** cost?!?!", "How much does an Xbox 360 cost"),
    ("what is snake_case 👍🏽", "what is snake_case"),
    ("Tom &amp; Jerry ka episode kab aaya?", "Tom & Jerry ka episode kab aaya"),
    ("👨\u200d👩\u200d👧 family plan ki keemat", "family plan ki keemat"),
    ("क्\u200dया यह सच है?", "क्\u200dया यह सच है"),  # a ZWJ inside a word stays
    ("1 किलोग्राम में कितने ग्राम होते हैं?", "1 किलोग्राम में कितने ग्राम होते हैं"),
    ("🍵", "🍵"),  # nothing else: the text itself (the input guard refuses it)
])
def test_decorations_are_removed_and_words_kept(decorated, plain):
    assert undecorated(decorated) == plain


@st.composite
def decorated(draw, question: str) -> str:
    """``question`` with emoji around or between its words, a word wrapped in a tag or
    Markdown, and another ending."""
    words = question.rstrip("?।").split()
    if draw(st.booleans()):
        i = draw(st.integers(0, len(words) - 1))
        opening, closing = draw(st.sampled_from(TAGS))
        words[i] = f"{opening}{words[i]}{closing}"
    for _ in range(draw(st.integers(0, 3))):
        words.insert(draw(st.integers(0, len(words))), draw(st.sampled_from(EMOJI)))
    return " ".join(words) + draw(st.sampled_from(("", *ENDINGS)))


QUESTIONS = ("How much does an Xbox 360 cost?", "calories in a small cucumber",
             "छोटे खीरे में कैलोरी की मात्रा?", "xbox 360 ki keemat kitni hai",
             "Who is the Prime Minister of India?")


def _outcome(result) -> tuple:
    return (result.status, result.answer, result.top_score,
            [c.passage_id for c in result.citations])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_decorations_never_change_the_outcome(fake_pipeline, data):
    """Through the fake pipeline (its encoder hashes words, so any leftover decoration would
    move the scores): the same status, answer, score and citations as the plain question."""
    question = data.draw(st.sampled_from(QUESTIONS))
    text = data.draw(decorated(question))
    assert _outcome(fake_pipeline.ask(text)) == _outcome(fake_pipeline.ask(question)), text


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_decorations_never_change_the_kind_of_a_real_answer(pipeline, data):
    """The real pipeline (encoder, BM25, readers, gate): emoji, tags and end marks never change
    a question's kind or answer (issue 42 found "Green tea में caffeine कितना होता है?" hedged,
    and answered confidently with emoji or ``<b>`` tags)."""
    question = data.draw(st.sampled_from((
        "Green tea में caffeine कितना होता है?", "1 किलोग्राम में कितने ग्राम होते हैं?",
        "How much does an Xbox 360 cost?", "छोटे खीरे में कैलोरी की मात्रा")))
    text = data.draw(decorated(question))
    plain, fancy = pipeline.ask(question), pipeline.ask(text)
    assert (fancy.status, fancy.answer) == (plain.status, plain.answer), text
    assert fancy.query == clean_query(text)  # the reply keeps the user's text (cleaned only)
