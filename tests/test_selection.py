"""Answer selection across the retrieved passages, on real passages and the project's natural
questions (eval/natural_questions.jsonl)."""

import json
import re
import sys
from pathlib import Path

import pytest

from rag.pipeline import Pipeline
from rag.selection import (
    FEATURES,
    MAX_ANSWER_CHARS,
    MODEL_PATH,
    AnswerSelector,
    Idf,
    asked_kind,
    sentences_of,
)
from rag.types import Hit, Status

ROOT = Path(__file__).resolve().parents[1]
NATURAL = ROOT / "eval" / "natural_questions.jsonl"


def _natural() -> list[dict]:
    return [json.loads(line) for line in NATURAL.open(encoding="utf-8") if line.strip()]


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("How much does an Xbox 360 cost?", "number"),
        ("how long does a broken toe take to heal", "number"),
        ("When did Rachel Carson die?", "date"),
        ("In what year was the city founded?", "date"),
        ("Who makes the Xbox 360?", "other"),
        ("एक्सबॉक्स 360 की कीमत कितनी है?", "number"),
        ("साइरीन कब बसाया गया था?", "date"),
        ("એક્સબોક્સ કેટલું મોંઘું છે?", "number"),
        ("સ્ટબહબની સ્થાપના ક્યારે થઈ?", "date"),
        ("ఈగల్స్ ఎంత వేగంగా ఎగురుతాయి?", "number"),
        ("ఇది ఎప్పుడు మొదలైంది?", "date"),
    ],
)
def test_kind_of_fact_asked_in_four_languages(question, kind):
    assert asked_kind(question) == kind


def test_short_pieces_are_joined_so_a_heading_is_never_a_candidate():
    text = "Cost. The Xbox 360 costs $199 at most stores in the United States today. Yes."
    assert sentences_of(text) == [text]  # "Cost." joins the next sentence, "Yes." the previous
    long = "A first sentence that is long enough to stand on its own here. " * 2
    assert len(sentences_of(long)) == 2


def test_idf_weights_rare_words_over_common_ones(sample_passages):
    idf = Idf(sample_passages)
    assert idf("en", "xbox") > idf("en", "price") > idf("en", "the")
    assert idf("hi", "एक्सबॉक्स") > idf("hi", "है")
    assert idf("en", "zzzunseenword") == max(idf("en", "xbox"), idf("en", "zzzunseenword"))


def test_shipped_model_has_the_current_features():
    selector = AnswerSelector.load()
    assert len(selector.coef) == len(FEATURES)
    data = json.loads(MODEL_PATH.read_text())
    assert "answerable training questions" in data["fitted_on"]
    assert data["encoder_variant"] == "onnx-int8" and data["retrieval"] == "hybrid"


def test_the_readme_demo_is_answered_from_the_sentence_that_states_the_calories(pipeline):
    # issue 22: it used to be answered from pickled-cucumber calories (another passage)
    result = pipeline.ask("छोटे खीरे में कैलोरी की मात्रा")
    assert result.status is Status.ANSWERED, result.message
    assert "छोटे खीरे (पील्ड) में 19 कैलोरी" in result.answer
    assert result.citations[0].passage_id == "hi-59804-7"


@pytest.mark.parametrize(
    ("question", "span"),
    [
        ("How much water per year does a faucet leaking 10 drips a minute waste?", "526 gallons"),
        ("जापानी टैंटो खंजर का ब्लेड कितना लंबा होता है?", "15 से 30 सेमी"),
    ],
)
def test_answer_can_come_from_a_passage_below_the_top_hit(pipeline, question, span):
    # dense retrieval, where these passages rank below the top hit (hybrid ranks the English
    # one first); selection reads all five hits either way
    dense = Pipeline(pipeline.settings, pipeline.encoder, pipeline.index, pipeline.answers.gate)
    result = dense.ask(question)
    assert result.status is Status.ANSWERED, result.message
    assert span in result.answer
    top_id = result.trace.get("search").detail.split()[0]
    assert result.citations[0].passage_id != top_id  # the passage that states it comes first
    assert top_id in [c.passage_id for c in result.citations]
    assert "hit 1," not in result.trace.get("select_answer").detail


@pytest.mark.parametrize("question", [
    "Who makes the Xbox 360?",  # passages give prices and features, never the maker
    "What were the names of the brothers who founded Aldi?",
])
def test_near_misses_are_never_answered_confidently_with_the_gate_inputs_shown(pipeline,
                                                                              question):
    """Refused, or at most hedged ("not sure", issue 31: out of fold 22 % of English
    near-misses are hedged, 7 % answered confidently)."""
    result = pipeline.ask(question)
    assert result.status in (Status.REFUSED_UNANSWERABLE, Status.HEDGED), result.answer
    assert (result.answer == "") is (result.status is Status.REFUSED_UNANSWERABLE)
    assert "answer_probability" in result.trace.get("answerability_gate").detail


def test_answers_stay_answers_at_most_two_sentences_and_300_characters(pipeline):
    rows = _natural()[::8]  # every 8th question, all four languages
    answered = [pipeline.ask(r["question"]) for r in rows]
    answered = [r for r in answered if r.shows_answer]  # confident or hedged (issue 31)
    assert len(answered) >= len(rows) / 3
    for result in answered:
        assert len(result.answer) <= MAX_ANSWER_CHARS
        # one candidate sentence, or two of the same passage ("sentence 2/5 + 3/5")
        detail = result.trace.get("select_answer").detail
        assert re.search(r"sentence \d+/(\d+)( \+ \d+/\1)?,", detail), detail


def test_development_set_is_well_formed():
    sys.path.insert(0, str(ROOT / "scripts"))
    from check_questions import CORPUS, check

    passages = {p["id"]: p for p in map(json.loads, CORPUS.open(encoding="utf-8"))}
    rows = _natural()
    assert check(rows, passages, {p["query_id"] for p in passages.values()}) == []
    counts = {(lang, kind): sum(r["lang"] == lang and r["kind"] == kind for r in rows)
              for lang in ("en", "hi", "gu", "te") for kind in ("answerable", "near_miss")}
    assert counts[("en", "answerable")] >= 120 and counts[("hi", "answerable")] >= 120
    assert counts[("en", "near_miss")] >= 60 and counts[("hi", "near_miss")] >= 60
    assert min(counts[(lang, "answerable")] for lang in ("gu", "te")) >= 20
    assert min(counts[(lang, "near_miss")] for lang in ("gu", "te")) >= 10
    assert all(re.search(r"\w", r["question"]) for r in rows)


def test_check_questions_flags_a_span_that_is_not_verbatim(sample_passages):
    sys.path.insert(0, str(ROOT / "scripts"))
    from check_questions import check

    passages = {p.id: {"id": p.id, "lang": p.lang, "text": p.text, "query_id": p.query_id}
                for p in sample_passages}
    row = {"id": "x", "lang": "en", "kind": "answerable", "question": "How much?",
           "query_id": 331047, "passage_id": "en-331047-0", "answer": "$999,999"}
    problems = check([row], passages, {331047})
    assert problems and "not verbatim" in problems[0]


def test_selection_reads_a_hit_in_the_questions_language(pipeline, sample_passages):
    by_id = {p.id: p for p in sample_passages}
    en = by_id["en-233826-0"]
    hits = [Hit(en, 0.9, 0.9)]
    selection = pipeline.answers.selector.select(
        "గద్దలు ఎంత వేగంగా ఎగురుతాయి?", "te", hits,
        lambda hit: pipeline.in_language(hit, "te"), pipeline.answers.idf)
    assert selection.best.source.id == "te-233826-0"
    assert selection.best.hit.passage.id == "en-233826-0"
    assert "via sibling of en-233826-0" in selection.detail


# ------------------------------------------------------------ pinned scores (issue 23)

PINNED = ROOT / "tests" / "fixtures" / "selection_scores.json"
"""Questions with fixed hits (passage id, cosine), and what the shipped selector and gate made of
them when the features were still a positional array (commit ef202ac): every candidate's
probability, the top three candidates' features, the answer, and the gate's screen and full
probabilities (answer cosine fixed at 0.9, the question's style left at typed). Written by
:func:`pinned_outcome`; the gate's two numbers were rewritten when the gate was refitted with the
question-style signals and the operating-point rule (issue 22), and the probabilities, screen and
gate when both were refitted on onnx-int8's export 5 (issue 20; features and answers unchanged,
checked by this test before the refit), and the Hindi cucumber case's when issue 34 stopped
joining a short sentence across a danda (its candidates changed, its answer did not), and the
probabilities, screen and gate when both were refitted with the English reader and hedge
thresholds (issue 31: answers unchanged; the Xbox question's second and third candidates swapped
places, so its top-3 features were rewritten in the new order), and again when both were
refitted with the multilingual student reading hi/gu/te (issue 32: answers unchanged, every
feature row unchanged; the Hindi cucumber question's second and third candidates swapped
places), and again when both were refitted with the re-pick and the hedge rule that counts the
dataset's not-in-corpus queries in the band (issue 32: answers and feature rows unchanged; the
Hindi cucumber question's second and third candidates, 0.426 and 0.423, swapped back), and
again when both were refitted with the near-corpus negatives, the follow-up pairs and the answer
passage's coverage (issue 42: answers unchanged; the Xbox and Coal Miner's Daughter questions'
close candidates swapped places, and the Gujarati eagle question's third candidate is now
another, as its third and fourth swapped). So the
features guard the code; the probabilities guard the shipped model files against drift, not a
refit's correctness (scripts/fit_answering.py reports that)."""


def pinned_outcome(case: dict, by_id: dict, idf: Idf, selector: AnswerSelector,
                   gate) -> dict:
    """What ``selector`` and ``gate`` make of one case of :data:`PINNED` (its ``query``, ``lang``,
    ``hits`` as [passage id, cosine] and ``read``: ``own`` passage or ``sibling`` translation
    in the question's language where the corpus has it)."""
    from rag.answer import gate_features
    from rag.answer.signals import SCREEN_FEATURES
    from rag.selection import candidate_features

    lang = case["lang"]
    hits = [Hit(by_id[pid], score, score) for pid, score in case["hits"]]

    def in_language(hit: Hit):
        if case["read"] == "own":
            return hit.passage
        return by_id.get(hit.passage.sibling_id(lang), hit.passage)

    ranked = selector.score(candidate_features(case["query"], lang, hits, in_language, idf))
    selection = selector.compose(case["query"], ranked)
    features = gate_features(hits, selection, 0.84, 0.9)
    screen = gate.screen_model(lang)
    p_screen = screen.probability(features.vector(SCREEN_FEATURES))
    return {
        "probabilities": [c.probability for c in ranked],
        "top_features": [[float(x) for x in c.features] for c in ranked[:3]],
        "answer": selection.text,
        "screen": float(p_screen[0]) if screen.is_screened(p_screen, gate.screen_band)[0]
        else None,  # None: not sure enough alone
        "gate": float(gate.gate_model(lang).probability(features.vector())[0]),
    }


def test_scores_of_real_candidates_are_those_pinned_before_named_features(sample_passages):
    from rag.answer import GateModels

    data = json.loads(PINNED.read_text(encoding="utf-8"))
    by_id = {p.id: p for p in sample_passages}
    idf, selector, gate = Idf(sample_passages), AnswerSelector.load(), GateModels.load()
    for case in data["cases"]:
        got = pinned_outcome(case, by_id, idf, selector, gate)
        want = case["expected"]
        assert got["answer"] == want["answer"], case["query"]
        # Equal to 1e-12, not bit for bit: IDF weights are summed in the order of a set of
        # words, which Python's string hashing changes from one process to the next (and BLAS
        # sums may differ in their last bits between machines).
        for got_row, want_row in zip(got["top_features"], want["top_features"], strict=True):
            assert got_row == pytest.approx(want_row, rel=1e-12, abs=1e-15), case["query"]
        assert got["probabilities"] == pytest.approx(want["probabilities"], rel=1e-12, abs=0)
        for key in ("screen", "gate"):
            assert got[key] == (None if want[key] is None
                                else pytest.approx(want[key], rel=1e-12, abs=0)), key
