"""The follow-up reading (issue 44, rag/followup.py): a message read with the conversation's
previous turn when it leans on it, alone when it has a topic of its own."""

from __future__ import annotations

import pytest

from rag.followup import has_marker, leans_on, reading_text, search_text, topics_of
from rag.types import Hit, Passage, Status, Turn

CUCUMBER = Turn("How many calories are in a small cucumber", "en", ("en-59804-7", "en-59804-2"))
XBOX = "How much does an Xbox 360 cost?"


def hit(pid: str, score: float = 0.9) -> Hit:
    lang, topic, index = pid.split("-")
    return Hit(Passage(pid, lang, "text", int(topic), int(index)), score, score)


@pytest.mark.parametrize(("message", "lang", "expected"), [
    ("and a large one?", "en", True),
    ("how long does it last", "en", True),
    ("What does MBA stand for?", "en", False),
    ("और बड़े वाले का?", "hi", True),
    ("aur xbox one ki?", "hi", True),  # Latin letters, read in Devanagari ("और")
    ("इसका दाम कितना है", "hi", True),
    ("भारत की राजधानी क्या है", "hi", False),
    ("એનું price કેટલું છે?", "gu", True),
    ("దాని ధర ఎంత?", "te", True),
])
def test_words_that_point_back_in_four_languages(message, lang, expected):
    assert has_marker(message, lang) is expected


def test_the_reading_keeps_the_previous_topic_not_what_was_asked_of_it():
    idf = {"calories": 2.0, "small": 3.0, "cucumber": 6.0}.get
    text = reading_text(CUCUMBER, "and a large one?", "en", lambda lang, w: idf(w, 9.0), 4.0)
    assert text == "and a large one? cucumber"
    assert search_text(CUCUMBER, "and a large one?") == \
        "How many calories are in a small cucumber and a large one?"


def test_a_message_leans_on_the_turn_when_alone_it_finds_nothing_or_the_same_topic():
    topics = topics_of(CUCUMBER.passage_ids)
    assert topics == {"59804"}
    other, same = [hit("en-331047-0")], [hit("en-59804-3")]
    assert leans_on("and a large one?", "en", topics, 0.80, other, same, 0.84)[0]  # below
    assert leans_on("is that fresh", "en", topics, 0.90, same, same, 0.84)[0]  # same topic
    # points back, with the context lands on the topic, alone barely over the floor
    assert leans_on("and a large one?", "en", topics, 0.85, other, same, 0.84, 0.03)[0]
    # a question with its own topic, well over the floor
    leans, why = leans_on("What does MBA stand for?", "en", topics, 0.90, other, same, 0.84)
    assert not leans and "own" in why
    leans, _ = leans_on("and what does MBA stand for", "en", topics, 0.90, other, other, 0.84)
    assert not leans  # "and", but the context does not land on the previous topic


@pytest.mark.slow
def test_a_follow_up_is_answered_from_the_previous_topic(pipeline):
    first = pipeline.ask(XBOX)
    turn = Turn(first.searched or first.query, first.lang,
                tuple(c.passage_id for c in first.citations), first.answer)
    alone = pipeline.ask("and the xbox one?")
    result = pipeline.ask("and the xbox one?", after=turn)
    assert result.followup.is_followup and XBOX.rstrip("?") in result.followup.searched
    stage = result.trace.get("followup")
    assert stage.decision == "used" and "searched as" in stage.detail
    assert result.query == "and the xbox one?"  # the message as typed
    assert alone.followup is None and alone.trace.get("followup") is None
    if result.shows_answer:
        assert "331047" in result.citations[0].passage_id  # the Xbox passages


@pytest.mark.slow
def test_a_complete_question_after_another_is_answered_as_when_asked_alone(pipeline):
    turn = Turn(XBOX.rstrip("?"), "en", ("en-331047-0",))
    question = "छोटे खीरे में कैलोरी की मात्रा"
    alone, after = pipeline.ask(question), pipeline.ask(question, after=turn)
    assert not after.followup.is_followup
    assert (after.status, after.answer) == (alone.status, alone.answer)
    assert after.status is Status.ANSWERED
