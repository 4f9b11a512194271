"""The multilingual student reader's training data and draws (issue 32): sentence alignment,
labels, the pairs an epoch trains on, and what is trained."""

from __future__ import annotations

import numpy as np

from ragtools.student import epoch_pairs, is_trained
from ragtools.student_data import (
    _labels,
    held_back_for_the_test_set,
    holds,
    mutual_alignment,
    narrowed,
)


def unit(*rows: list[float]) -> np.ndarray:
    vectors = np.asarray(rows, dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_sentences_align_only_as_mutual_best_matches_at_most_one_position_apart():
    en = unit([1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1])
    # hi 0 ~ en 0; hi 1 ~ en 2 (one sentence split: shift 1); hi 2 ~ en 2 too but less;
    # hi 3 ~ en 0 (three positions away: a different sentence, not a sibling)
    hi = unit([0.9, 0.1, 0, 0], [0, 0.1, 0.95, 0], [0, 0.2, 0.8, 0], [0.8, 0, 0, 0.1])
    assert mutual_alignment(en, hi) == {0: 0, 1: 2}
    assert mutual_alignment(en[:0], hi) == {}


def test_labels_mark_the_sentences_holding_the_span_and_none_for_a_near_miss():
    sentences = [{"en": "The dam is 221 m high.", "hi": "बांध 221 मीटर ऊंचा है।"},
                 {"en": "It was finished in 1936."}]
    assert holds(sentences[0]["en"], "221 m")
    assert not holds(sentences[0]["en"], "")
    assert _labels(sentences, {"hi": "221 मीटर"}, "answerable") == [1, 0]
    assert _labels(sentences, {"en": "221 m"}, "near_miss") == [0, 0]
    assert _labels(sentences, {}, "dataset") == [None, None]


def record(n: int = 12) -> dict:
    sentences = [{"en": f"English sentence {i}.", "hi": f"हिंदी वाक्य {i}।"} for i in range(n)]
    return {"group": "topic:1", "split": "train", "kind": "answerable",
            "questions": {"en": "Which sentence?", "hi": "कौन सा वाक्य?"},
            "sentences": sentences, "teacher": [float(-i) for i in range(n)],
            "label": [1 if i == 5 else 0 for i in range(n)]}


def test_an_epoch_draws_the_answer_hard_and_random_sentences_reproducibly():
    first, again, second = epoch_pairs([record()], 0), epoch_pairs([record()], 0), \
        epoch_pairs([record()], 1)
    assert first == again  # seeded: a resumed run trains on the same pairs
    assert first != second
    sentences = {p.sentence for p in first}
    assert any("5" in s for s in sentences)  # the answer sentence, always
    assert any(s.endswith(("0.", "0।")) for s in sentences)  # the teacher's best negative
    assert len(first) == 1 + 6
    # never the teacher's own job when the sentence has another language
    assert all(not (p.q_lang == "en" and p.s_lang == "en") for p in first)


def test_narrowing_keeps_the_answer_the_nearest_and_a_few_at_random():
    r = record(30)
    questions = {"Which sentence?": unit([1, 0])[0], "कौन सा वाक्य?": unit([1, 0])[0]}
    vectors = {}
    for i, s in enumerate(r["sentences"]):
        for text in s.values():
            vectors[text] = unit([1, i / 10])[0]  # closer to the question the lower i
    import random

    kept = narrowed(r, questions, vectors, random.Random(0))
    texts = [s["en"] for s in kept["sentences"]]
    assert "English sentence 5." in texts and kept["label"][texts.index(
        "English sentence 5.")] == 1
    assert all(f"English sentence {i}." in texts for i in range(10))
    assert len(texts) == 10 + 4  # the answer is among the ten nearest here


def test_only_the_last_layers_and_the_head_are_trained():
    assert is_trained("head.weight")
    assert is_trained("encoder.encoder.layer.8.attention.self.query.weight")
    assert is_trained("encoder.encoder.layer.11.output.dense.bias")
    assert not is_trained("encoder.encoder.layer.7.output.dense.bias")
    assert not is_trained("encoder.embeddings.word_embeddings.weight")


def test_the_pair_builder_holds_back_what_the_test_set_uses():
    topics, passages = held_back_for_the_test_set()
    assert len(topics) > 20 and 5301 in topics  # en-a-001's topic
    assert passages and all(p.startswith(("gu-", "te-")) for p in passages)
