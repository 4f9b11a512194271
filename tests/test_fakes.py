"""The fake encoder keeps the Encoder contract, and the fake pipeline answers and refuses what
the fast tests rely on (tests/fakes.py); the numbers its docstrings quote are checked here."""

from __future__ import annotations

import numpy as np
import pytest

from rag.types import Status, Turn
from tests.fakes import FAKE_FLOOR, HashingEncoder, read_followup

XBOX = "How much does an Xbox 360 cost?"


def test_hashing_encoder_gives_unit_float32_rows_the_same_in_every_call():
    encoder = HashingEncoder()
    texts = [XBOX, "छोटे खीरे में कैलोरी की मात्रा", "?!", "the"]
    vectors = encoder.encode_passages(texts)
    assert vectors.shape == (4, encoder.dim) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(vectors, HashingEncoder().encode_queries(texts))
    assert encoder.encode_queries([]).shape == (0, encoder.dim)


def test_shared_words_score_higher_than_unrelated_ones():
    encoder = HashingEncoder()
    query, related, unrelated = encoder.encode_queries(
        [XBOX, "An Xbox 360 costs about $200.", "Cucumbers are mostly water."])
    assert query @ related > FAKE_FLOOR > query @ unrelated


@pytest.mark.parametrize(("question", "lang"), [
    (XBOX, "en"),
    ("छोटे खीरे में कैलोरी की मात्रा", "hi"),
    ("શું તબીબી મારિજુઆના મદદ કરે છે?", "gu"),
    ("కాలుష్యం మానవ జనాభాను ఎలా పెంచుతుంది", "te"),
])
def test_fake_pipeline_answers_the_fixture_questions_in_their_language(fake_pipeline, question,
                                                                        lang):
    result = fake_pipeline.ask(question)
    assert result.status is Status.ANSWERED, result.message
    assert result.lang == lang and result.citations[0].lang == lang
    assert 0.28 <= result.top_score <= 0.70  # 0.291-0.692
    assert result.trace.get("answerability_gate") is None  # the gate is off


@pytest.mark.parametrize("question", ["Who is the Prime Minister of India?",
                                      "what is the weather in Goa right now",
                                      "भारत के प्रधानमंत्री कौन हैं?"])
def test_fake_pipeline_refuses_questions_outside_its_passages_at_the_fake_floor(fake_pipeline,
                                                                                 question):
    result = fake_pipeline.ask(question)
    assert result.status is Status.REFUSED_NO_MATCH
    assert result.floor == FAKE_FLOOR and 0.0 <= result.top_score < 0.20  # 0.107-0.181


@pytest.mark.parametrize(("message", "after", "searched"), [
    ("and a big one?", "How many calories are in a small cucumber?",
     "calories small cucumber big one"),
    ("और बड़े वाले में?", Turn("छोटे खीरे में कैलोरी की मात्रा", "hi"),
     "छोटे खीरे कैलोरी मात्रा बड़े वाले"),
    ("aur xbox one ki?", Turn("xbox 360 ki keemat kitni hai", "hi"),
     "xbox 360 ki keemat kitni hai aur one"),
])
def test_fake_reading_searches_a_short_marked_message_with_the_previous_question(
        message, after, searched):
    reading = read_followup(message, after)
    assert reading.is_followup and reading.searched == searched


@pytest.mark.parametrize(("message", "after", "why"), [
    ("Who is the Prime Minister of India?", "How much does an Xbox 360 cost?", "7 words > 6"),
    ("capital of Gujarat", "How much does an Xbox 360 cost?", "no follow-up marker"),
    ("और बड़े वाले में?", Turn("How many calories are in a small cucumber?", "en"),
     "asked in hi, previous turn in en"),
])
def test_fake_reading_reads_other_messages_alone_and_says_why(message, after, why):
    reading = read_followup(message, after)
    assert not reading.is_followup and reading.searched == "" and why in reading.detail


def test_fake_pipeline_answers_a_follow_up_from_the_previous_topic_it_refuses_alone(
        fake_pipeline):
    alone = fake_pipeline.ask("and a big one?")
    after = fake_pipeline.ask("and a big one?", after="How many calories are in a small cucumber?")
    assert alone.status is Status.REFUSED_NO_MATCH and alone.top_score < FAKE_FLOOR
    assert after.shows_answer and after.citations[0].passage_id.startswith("en-59804-")
    assert after.trace.stages[0].name == "followup"
    assert after.trace.stages[0].decision == "used"
