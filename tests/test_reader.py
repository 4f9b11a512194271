"""The English reader (rag/reader.py) on real sentences: the sentence of a training question's
passage that holds its answer span outscores a sentence of another topic, and mostly the other
sentences of its own passage; inside the pipeline its scores are in ``/why``'s trace. Needs the
reader's files (``python -m ragtools build-encoder``), so these are slow tests."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rag.pipeline import Pipeline
from rag.prepared import Prepared
from rag.reader import load_reader
from rag.selection import sentences_of
from rag.types import Trace
from ragtools.reader_files import ensure_reader_files

ROOT = Path(__file__).resolve().parents[1]
N_QUESTIONS = 40

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reader():
    return load_reader(ensure_reader_files())


def english_cases(sample_passages) -> list[tuple[str, str, list[str]]]:
    """(question, the sentence holding its span, the other sentences of its passage) for the
    first :data:`N_QUESTIONS` English typed answerable training questions whose span lies in
    one sentence."""
    by_id = {p.id: p for p in sample_passages}
    cases = []
    for row in map(json.loads, (ROOT / "eval" / "training" / "en_a.jsonl").open(encoding="utf-8")):
        if row["kind"] != "answerable" or row["style"] != "typed" or row["passage_id"] not in by_id:
            continue
        sentences = sentences_of(by_id[row["passage_id"]].text)
        right = [s for s in sentences if row["answer"] in s]
        if right:
            cases.append((row["question"], right[0], [s for s in sentences if s != right[0]]))
        if len(cases) == N_QUESTIONS:
            break
    return cases


def test_the_sentence_holding_the_answer_outscores_one_of_another_topic(reader, sample_passages):
    cases = english_cases(sample_passages)
    assert len(cases) == N_QUESTIONS
    for k, (question, right, _) in enumerate(cases):
        unrelated = cases[(k + N_QUESTIONS // 2) % N_QUESTIONS][1]  # another question's answer
        right_score, unrelated_score = reader.score(question, [right, unrelated])
        assert right_score > unrelated_score + 2.0, (question, right, unrelated)


def test_the_sentence_holding_the_answer_is_mostly_the_best_of_its_passage(reader,
                                                                          sample_passages):
    top1 = []
    for question, right, others in english_cases(sample_passages):
        if others:
            scores = reader.score(question, [right, *others])
            top1.append(int(np.argmax(scores)) == 0)
    # issue 31 measured 73 % top-1 over a whole topic's ~32 sentences; one passage is easier
    assert len(top1) >= 20 and np.mean(top1) >= 0.7


def test_an_english_question_is_read_and_its_scores_are_in_the_trace(pipeline):
    if not pipeline.answers.reads("en"):
        pytest.skip("the shipped gate has no reader model")
    result = pipeline.ask("How much does an Xbox 360 cost?")
    stage = result.trace.get("reader")
    assert stage is not None and stage.detail.startswith("reader pick ")
    scores = stage.detail.split("scores [")[1].split("]")[0].split(", ")
    assert 1 <= len(scores) <= pipeline.answers.gate.reader_top_k
    # the selector nearly ties two sentences of the price passage (p 0.974 and 0.971); whichever
    # the re-pick takes, the stage says whether the pick moved, and the answer holds a price
    assert stage.decision in ("read", "re-picked") and "$" in result.answer
    assert (stage.decision == "re-picked") == ("re-picked the selector's no. " in stage.detail)
    # and where the pick does move (some of the first typed English training questions), the
    # stage says from which of the selector's candidates
    rows = [row for row in map(json.loads, (ROOT / "eval" / "training" / "en_a.jsonl").open(
        encoding="utf-8")) if row["kind"] == "answerable" and row["style"] == "typed"][:50]
    moved = [read for read in (pipeline.ask(row["question"]).trace.get("reader") for row in rows)
             if read is not None and read.decision == "re-picked"]
    assert moved and all(re.search(r"re-picked the selector's no\. [2-9]: from ", read.detail)
                         for read in moved), [read.detail for read in moved[:3]]
    # Hindi is read by the multilingual student (issue 32), and the trace says so
    hindi = pipeline.ask("छोटे खीरे में कैलोरी की मात्रा").trace.get("reader")
    assert pipeline.answers.reads("hi") and hindi is not None and \
        hindi.decision in ("read", "re-picked")
    assert "(multilingual student reader" in hindi.detail


@pytest.mark.parametrize("path", ["en_a.jsonl", "hi_a.jsonl"])
def test_the_re_pick_holds_the_answer_at_least_as_often_as_the_selectors_pick(pipeline, path):
    """The selector's and the reader's scores together pick the answer (``Pipeline.repick``,
    the gate file's pick weights): over the first typed answerable training questions of a
    file, the re-picked answer holds the answer span at least as often as the selector's own,
    and the pick does move for some; where it moves, ``/why``'s reader stage says from where."""
    answers = pipeline.answers
    if not all(answers.gate.pick_weights(lang) for lang in ("en", "hi")):
        pytest.skip("the shipped gate has no pick weights")
    ungated = Pipeline(replace(pipeline.settings, use_gate=False), pipeline.encoder,
                       pipeline.index, gate=None, fusion=pipeline.fusion)
    rows = [row for row in map(json.loads, (ROOT / "eval" / "training" / path).open(
        encoding="utf-8")) if row["kind"] == "answerable" and row["style"] == "typed"][:50]
    held = {"selector": 0, "re-picked": 0}
    moved = 0
    for row in rows:
        prepared = ungated.prepare(row["question"], None, None, Trace())
        if not isinstance(prepared, Prepared) or prepared.selection is None:
            continue
        reading = answers.read(prepared.query, prepared.selection, prepared.lang)
        picked, _, rank = answers.repick(prepared.query, prepared.selection, reading,
                                         prepared.lang)
        held["selector"] += row["answer"] in prepared.selection.text
        held["re-picked"] += row["answer"] in picked.text
        moved += rank > 0
    assert held["re-picked"] >= held["selector"] > 0 and moved > 0, (held, moved)


def test_a_question_longer_than_a_pair_is_cut_not_an_error(reader):
    """Random text of 1,000 characters as the question (issue 34's fuzzing found it): the
    tokenizer cut only the sentence before and raised; now the longer side is cut, and the
    scores of an ordinary pair do not change."""
    long_question = "kya " * 250
    scores = reader.score(long_question, ["Cucumbers are 95 percent water.", "Yes."])
    assert scores.shape == (2,) and np.isfinite(scores).all()
    xbox = reader.score("How much does an Xbox 360 cost?",
                        ["The Xbox 360 costs about $199.", "Cucumbers are green."])
    assert xbox[0] > 4.0 > -4.0 > xbox[1]
