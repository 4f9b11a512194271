"""The fake encoder keeps the Encoder contract, and the fake pipeline answers and refuses what
the fast tests rely on (tests/fakes.py); the numbers its docstrings quote are checked here."""

from __future__ import annotations

import numpy as np
import pytest

from rag.types import Status
from tests.fakes import FAKE_FLOOR, HashingEncoder

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
