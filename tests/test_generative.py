"""Generative answers end to end: a real Pipeline over a 300-passage index of the shared sample,
the real OpenRouter client, and a local OpenAI-shaped server scripted per test.

Each case checks what the user would see (status, answer text, mode, citations) and what the
trace says. The index takes about a minute to build on 2 cores (once per module).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bot.terminal.ask import ask_once
from clients.openrouter import OpenRouterClient, OpenRouterSettings
from rag.answering import Answerer
from rag.corpus import read_passages
from rag.generative import ask_generative, unsupported_facts
from rag.index import PassageIndex
from rag.pipeline import Pipeline
from rag.prompt import MalformedOutputError, filter_citations, parse_generation
from rag.settings import RagSettings
from rag.text import undecorated
from rag.types import Passage, Result, Status
from ragtools.index_build import build_index
from standins.openai import OpenAIStandin, Reply

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "data" / "msmarco-xi-sample" / "corpus.jsonl"
KEY = "test-key"
MODEL = "test/multilingual-json"
XBOX_QUERY_ID = 331047  # "how much xbox games cost": en and hi passages in the sample
XBOX_EN = "How much does an Xbox 360 cost?"
XBOX_HI = "Xbox 360 की कीमत कितनी है?"
# Supported by en-331047-0 ("The basic Xbox 360 will cost about $170 ... about $60 to $75 used").
GROUNDED_EN = "A basic Xbox 360 costs about $170, and a used first edition about $60 to $75."


@pytest.fixture(scope="module")
def small_pipeline(encoder, tmp_path_factory) -> Pipeline:
    """All 20 passages of the Xbox 360 query plus the first 140 other en and hi passages."""
    passages = read_passages(CORPUS)
    xbox = [p for p in passages if p.query_id == XBOX_QUERY_ID]
    others = [p for p in passages if p.query_id != XBOX_QUERY_ID]
    chosen = xbox + [p for p in others if p.lang == "en"][:140] + [
        p for p in others if p.lang == "hi"][:140]
    index_dir = tmp_path_factory.mktemp("generative-index")
    build_index(chosen, encoder, index_dir, show_progress=False)
    index = PassageIndex.load(index_dir, encoder_name=encoder.name)
    return Pipeline(RagSettings(index_dir=index_dir), encoder, index)


@pytest.fixture
async def llm():
    async with OpenAIStandin(api_key=KEY) as standin:
        yield standin


def make_client(llm: OpenAIStandin, **overrides) -> OpenRouterClient:
    fields = {"api_key": KEY, "base_url": llm.base_url, "model": MODEL, "timeout_s": 2.0}
    return OpenRouterClient(OpenRouterSettings(**(fields | overrides)))


@pytest.fixture
async def client(llm):
    async with make_client(llm) as c:
        yield c


def supplied_ids(call) -> list[str]:
    """Passage ids in the prompt of a recorded request, in order."""
    user = call.messages[1]["content"]
    return [part.split('"', 1)[0] for part in user.split('<passage id="')[1:]]


def stage_names(result: Result) -> list[str]:
    return [s.name for s in result.trace.stages]


def assert_extractive_fallback(result: Result, pipeline: Pipeline, query: str, lang: str | None,
                               reason: str) -> None:
    """The user sees exactly the extractive answer; the trace names the fallback reason."""
    extractive = pipeline.ask(query, lang=lang)
    assert result.status is Status.ANSWERED
    assert result.mode == "extractive"
    assert result.answer == extractive.answer
    assert [c.passage_id for c in result.citations] == [c.passage_id for c in extractive.citations]
    fallback = result.trace.get("fallback")
    assert fallback is not None and fallback.decision == reason
    names = stage_names(result)
    assert names.index("fallback") < names.index("answer")  # then the extractive stages ran
    assert result.trace.get("answer").decision == "extractive"


# ----- the scripted cases --------------------------------------------------------------
async def test_grounded_answer_is_shown_with_its_citation(small_pipeline, llm, client):
    llm.enqueue(Reply.answer(GROUNDED_EN, ["en-331047-0"], confidence=0.8))

    result = await ask_generative(small_pipeline, client, XBOX_EN, lang="en")

    assert result.status is Status.ANSWERED and result.mode == "generative"
    assert result.answer == GROUNDED_EN and result.answer_lang == "en"
    assert [c.passage_id for c in result.citations] == ["en-331047-0"]
    assert result.trace.get("search").detail.startswith("en-331047-0 ")
    label = small_pipeline.index.label_of("en-331047-0")
    query_vector = small_pipeline.encode_query(undecorated(XBOX_EN))  # as it was searched
    expected = float(small_pipeline.index.vectors([label])[0] @ query_vector)
    assert result.citations[0].score == pytest.approx(expected, abs=1e-5)
    assert result.citations[0].excerpt.startswith("On average, the Xbox 360 cost")
    assert stage_names(result) == ["input_guard", "language", "embed", "search",
                                   "relevance_guard", "select_answer", "lexical_guard",
                                   "generate", "citations", "grounding_guard"]
    generate = result.trace.get("generate")
    assert generate.decision == "ok" and f"model {MODEL}" in generate.detail
    assert "confidence 0.80" in generate.detail and generate.elapsed_ms > 0
    assert result.trace.get("citations").decision == "1 kept, 0 dropped"
    grounding = result.trace.get("grounding_guard")
    assert grounding.decision == "passed" and "-> overlap" in grounding.detail
    assert result.trace.get("fallback") is None
    assert len(llm.calls) == 1


async def test_request_sends_key_model_json_mode_and_the_top_passages(small_pipeline, llm,
                                                                       client):
    llm.enqueue(Reply.answer(GROUNDED_EN, ["en-331047-0"]))

    await ask_generative(small_pipeline, client, XBOX_EN, lang="en")

    (call,) = llm.calls
    assert call.path == "/api/v1/chat/completions"
    assert call.headers["Authorization"] == f"Bearer {KEY}"
    body = call.body
    assert body["model"] == MODEL and body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "English" in body["messages"][0]["content"] and '"citations"' in call.prompt
    ids = supplied_ids(call)
    assert len(ids) == 5 and ids[0] == "en-331047-0"
    assert all(i.startswith("en-") for i in ids)  # explicit language: only English passages
    assert body["messages"][1]["content"].endswith(f"Question: {undecorated(XBOX_EN)}")


async def test_malformed_reply_is_retried_once_then_the_answer_is_shown(small_pipeline, llm,
                                                                         client):
    llm.enqueue(Reply("Sure! The basic Xbox 360 costs about $170."),
                Reply.answer(GROUNDED_EN, ["en-331047-0"]))

    result = await ask_generative(small_pipeline, client, XBOX_EN, lang="en")

    assert result.status is Status.ANSWERED and result.mode == "generative"
    assert result.answer == GROUNDED_EN
    first, retry = result.trace.get("generate"), result.trace.get("generate_retry")
    assert first.decision == "malformed" and "not JSON" in first.detail
    assert retry.decision == "ok"
    assert len(llm.calls) == 2
    retry_messages = llm.calls[1].messages
    assert retry_messages[2] == {"role": "assistant",
                                 "content": "Sure! The basic Xbox 360 costs about $170."}
    assert "not JSON" in retry_messages[3]["content"]
    assert result.trace.get("fallback") is None


async def test_malformed_twice_falls_back_to_extractive_without_a_third_request(
        small_pipeline, llm, client):
    llm.enqueue(Reply('{"answer": "The basic Xbox 360 will cost about $170'),
                Reply(json.dumps({"answer": 170, "citations": "en-331047-0", "confidence": 1})),
                Reply.answer(GROUNDED_EN, ["en-331047-0"]))  # must never be requested

    result = await ask_generative(small_pipeline, client, XBOX_EN, lang="en")

    assert_extractive_fallback(result, small_pipeline, XBOX_EN, "en", "malformed_output")
    assert len(llm.calls) == 2 and llm.n_pending == 1
    assert result.trace.get("generate").decision == "malformed"
    assert result.trace.get("generate_retry").decision == "malformed"
    assert "answer is int" in result.trace.get("fallback").detail
    assert result.answer != GROUNDED_EN


async def test_invented_and_out_of_range_citations_are_dropped(small_pipeline, llm, client):
    # en-331047-6 supplied; en-999999-0 invented; hi-331047-0 is in the index but not supplied
    # (explicit English); 7 and "0" are out of range; "3" is passage number 3.
    llm.enqueue(Reply.answer(GROUNDED_EN, ["en-331047-0", "en-999999-0", "hi-331047-0", 7, "0",
                                           "3", "en-331047-0"]))

    result = await ask_generative(small_pipeline, client, XBOX_EN, lang="en")

    third = supplied_ids(llm.calls[0])[2]
    assert result.status is Status.ANSWERED and result.mode == "generative"
    assert [c.passage_id for c in result.citations] == ["en-331047-0", third]
    citations = result.trace.get("citations")
    assert citations.decision == "2 kept, 4 dropped"
    for dropped in ("en-999999-0 (not supplied)", "hi-331047-0 (not supplied)",
                    "7 (out of range 1..5)", "0 (out of range 1..5)"):
        assert dropped in citations.detail
    assert f"vs en-331047-0, {third}" in result.trace.get("grounding_guard").detail


async def test_only_invalid_citations_fall_back_to_extractive(small_pipeline, llm, client):
    llm.enqueue(Reply.answer(GROUNDED_EN, ["en-999999-0", 9]))

    result = await ask_generative(small_pipeline, client, XBOX_EN, lang="en")

    assert_extractive_fallback(result, small_pipeline, XBOX_EN, "en", "no_valid_citations")
    assert result.trace.get("citations").decision == "0 kept, 2 dropped"
    assert result.trace.get("grounding_guard").detail.startswith("overlap")  # the extractive one
    assert result.answer != GROUNDED_EN


async def test_fluent_unsupported_answer_falls_back_to_extractive(small_pipeline, llm, client):
    fluent = ("Microsoft discontinued the console after a recall, and owners received a free "
              "replacement.")
    llm.enqueue(Reply.answer(fluent, ["en-331047-0"], confidence=0.95))

    result = await ask_generative(small_pipeline, client, XBOX_EN, lang="en")

    assert_extractive_fallback(result, small_pipeline, XBOX_EN, "en", "ungrounded")
    assert fluent not in result.answer
    generative_guard = [s for s in result.trace.stages if s.name == "grounding_guard"][0]
    assert generative_guard.decision == "refused"
    assert generative_guard.detail.startswith("overlap 0.111, similarity 0.7")
    assert "-> none vs en-331047-0" in generative_guard.detail
    assert result.trace.get("grounding_guard").decision == "passed"  # the extractive answer's


@pytest.mark.parametrize(
    ("invented", "verdict"),
    [
        # Token overlap fails but cosine 0.807 >= 0.794 passes: only the fact check catches it.
        ("The Xbox 360 was designed by Sony in 1994 and runs exclusively on solar power.",
         "-> similarity; facts not in passages: 1994, Sony"),
        # Token overlap 0.400 >= 0.231 passes: only the fact check catches the invented maker.
        ("It is made by Nintendo and sold only in Japan.",
         "-> overlap; facts not in passages: Japan, Nintendo"),
    ],
)
async def test_answer_stating_facts_its_passages_lack_falls_back(
    small_pipeline, llm, client, invented, verdict
):
    llm.enqueue(Reply.answer(invented, ["en-331047-0"]))

    result = await ask_generative(small_pipeline, client, XBOX_EN, lang="en")

    assert_extractive_fallback(result, small_pipeline, XBOX_EN, "en", "ungrounded")
    generative_guard = [s for s in result.trace.stages if s.name == "grounding_guard"][0]
    assert generative_guard.decision == "refused"
    assert verdict in generative_guard.detail
    assert invented not in result.answer


async def test_timeout_falls_back_with_the_reason_in_the_trace(small_pipeline, llm):
    llm.enqueue(Reply.answer(GROUNDED_EN, ["en-331047-0"], delay_s=3.0))

    async with make_client(llm, timeout_s=0.5) as client:
        result = await ask_generative(small_pipeline, client, XBOX_EN, lang="en")

    assert_extractive_fallback(result, small_pipeline, XBOX_EN, "en", "timeout")
    generate = result.trace.get("generate")
    assert generate.decision == "timeout" and "after 0.5 s" in generate.detail
    assert 450 <= generate.elapsed_ms < 2500
    assert result.trace.get("generate_retry") is None and len(llm.calls) <= 1


async def test_rate_limit_falls_back_without_retrying(small_pipeline, llm, client):
    llm.enqueue(Reply.error(429, "Rate limit exceeded: free-models-per-min", retry_after=30),
                Reply.answer(GROUNDED_EN, ["en-331047-0"]))

    result = await ask_generative(small_pipeline, client, XBOX_EN, lang="en")

    assert_extractive_fallback(result, small_pipeline, XBOX_EN, "en", "rate_limited")
    detail = result.trace.get("fallback").detail
    assert "HTTP 429" in detail and "Retry-After 30 s" in detail
    assert len(llm.calls) == 1 and llm.n_pending == 1


async def test_server_error_falls_back(small_pipeline, llm, client):
    llm.enqueue(Reply.error(502, "upstream provider error"))

    result = await ask_generative(small_pipeline, client, XBOX_EN, lang="en")

    assert_extractive_fallback(result, small_pipeline, XBOX_EN, "en", "server_error")
    assert "HTTP 502" in result.trace.get("generate").detail


async def test_empty_answer_falls_back_to_extractive(small_pipeline, llm, client):
    llm.enqueue(Reply.answer("", [], confidence=0.0))

    result = await ask_generative(small_pipeline, client, XBOX_EN, lang="en")

    assert_extractive_fallback(result, small_pipeline, XBOX_EN, "en", "empty_answer")
    assert result.answer.strip()
    assert len(llm.calls) == 1  # a deliberate "no answer" is valid JSON: not retried
    assert result.trace.get("citations") is None


# ----- more behaviour ---------------------------------------------------------------------------
async def test_hindi_answer_grounded_in_a_hindi_passage_is_shown(small_pipeline, llm, client):
    hindi = "हार्ड ड्राइव और गेम के बिना एक Xbox 360 की कीमत लगभग $200 है।"
    llm.enqueue(Reply.answer(hindi, ["hi-331047-2"]))

    result = await ask_generative(small_pipeline, client, XBOX_HI)

    assert result.status is Status.ANSWERED and result.mode == "generative"
    assert result.lang == "hi" and result.answer_lang == "hi" and result.answer == hindi
    assert [c.passage_id for c in result.citations] == ["hi-331047-2"]
    assert "Hindi" in llm.calls[0].messages[0]["content"]
    assert result.trace.get("grounding_guard").decision == "passed"


@pytest.mark.parametrize(
    ("query", "lang", "answer", "cited"),
    [
        # an English answer citing the Hindi passage, to a Hindi question
        (XBOX_HI, None, "An Xbox 360 without a hard drive or any games costs about $200.",
         "hi-331047-2"),
        # a Hindi answer citing the English passage, to an English question
        (XBOX_EN, "en", "Xbox 360 का औसत मूल्य $80 से $250 के बीच है।", "en-331047-0"),
    ],
)
async def test_answer_in_another_language_than_the_question_falls_back(
    small_pipeline, llm, client, query, lang, answer, cited
):
    llm.enqueue(Reply.answer(answer, [cited]))

    result = await ask_generative(small_pipeline, client, query, lang=lang)

    assert_extractive_fallback(result, small_pipeline, query, lang, "wrong_language")
    assert result.answer_lang == result.lang and answer not in result.answer


async def test_answer_of_only_numbers_is_not_in_another_language(small_pipeline, llm, client):
    llm.enqueue(Reply.answer("$80-$250 [1]", [1]))

    result = await ask_generative(small_pipeline, client, XBOX_EN, lang="en")

    assert result.mode == "generative" and result.answer == "$80-$250 [1]"
    assert result.answer_lang == "en" and result.trace.get("fallback") is None


async def test_english_answer_with_one_hindi_word_is_shown_for_an_english_question(
    small_pipeline, llm, client
):
    answer = "On average, the Xbox 360 cost will be $80 to $250 (कीमत)."
    llm.enqueue(Reply.answer(answer, ["en-331047-0"]))

    result = await ask_generative(small_pipeline, client, XBOX_EN, lang="en")

    assert result.mode == "generative" and result.answer == answer
    assert result.answer_lang == "en" and result.trace.get("fallback") is None


async def test_off_corpus_question_is_refused_without_calling_the_model(small_pipeline, llm,
                                                                         client):
    result = await ask_generative(small_pipeline, client, "What is the capital of Mongolia?")

    assert result.status is Status.REFUSED_NO_MATCH and result.answer == ""
    assert "< floor 0.840 (en)" in result.message
    assert llm.calls == [] and result.trace.get("generate") is None


async def test_wrong_key_falls_back_as_unauthorized(small_pipeline, llm):
    async with make_client(llm, api_key="wrong") as client:
        result = await ask_generative(small_pipeline, client, XBOX_EN, lang="en")

    assert_extractive_fallback(result, small_pipeline, XBOX_EN, "en", "unauthorized")
    assert "HTTP 401" in result.trace.get("fallback").detail
    assert llm.calls[0].status == 401


async def test_missing_key_falls_back_without_a_request(small_pipeline, llm):
    async with make_client(llm, api_key="") as client:
        result = await ask_generative(small_pipeline, client, XBOX_EN, lang="en")

    assert_extractive_fallback(result, small_pipeline, XBOX_EN, "en", "unauthorized")
    assert "set OPENROUTER_API_KEY" in result.trace.get("fallback").detail
    assert llm.calls == []


async def test_unexpected_failure_becomes_an_error_result(small_pipeline, llm, client):
    result = await ask_generative(small_pipeline, client, XBOX_EN, lang="fr")

    assert result.status is Status.ERROR and result.answer == ""
    assert "ValueError" in result.message and "'fr'" in result.message
    assert result.trace.get("language").decision == "error"
    assert llm.calls == []


async def test_default_standin_reply_cites_the_first_passage(small_pipeline, llm, client):
    result = await ask_generative(small_pipeline, client, XBOX_EN, lang="en")

    assert result.status is Status.ANSWERED and result.mode == "generative"
    assert result.answer == ("On average, the Xbox 360 cost will be anywhere from $80 to as much "
                             "as $250 depending on the model purchased.")
    assert [c.passage_id for c in result.citations] == ["en-331047-0"]
    assert "overlap 1.000" in result.trace.get("grounding_guard").detail


def test_bot_ask_answers_generatively_through_the_standalone_standin(small_pipeline, monkeypatch):
    proc = subprocess.Popen(
        [sys.executable, "-m", "standins.openai", "--port", "0", "--api-key", "cli-key"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
    )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        assert ready, "standalone standin did not start within 20 s"
        line = proc.stdout.readline()
        base_url = line.split("base_url=", 1)[1].strip()
        monkeypatch.setenv("OPENROUTER_API_KEY", "cli-key")
        monkeypatch.setenv("OPENROUTER_BASE_URL", base_url)
        monkeypatch.setenv("OPENROUTER_MODEL", MODEL)

        result = asyncio.run(ask_once(small_pipeline, XBOX_EN, "en", OpenRouterSettings.from_env()))
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    assert result.status is Status.ANSWERED and result.mode == "generative"
    assert [c.passage_id for c in result.citations] == ["en-331047-0"]
    assert f"model {MODEL}" in result.trace.get("generate").detail


# ----- validation, citations and numbers (pure) -------------------------------------------------
@pytest.mark.parametrize(("content", "why"), [
    ("", "empty reply"),
    ("The Xbox 360 costs $170.", "not JSON"),
    ('["en-1-0"]', "expected an object"),
    ('{"answer": "x", "citations": []}', "missing key(s) confidence"),
    ('{"answer": null, "citations": [], "confidence": 0.5}', "answer is NoneType"),
    ('{"answer": "x", "citations": "en-1-0", "confidence": 0.5}', "list of passage ids"),
    ('{"answer": "x", "citations": [{"id": 1}], "confidence": 0.5}', "list of passage ids"),
    ('{"answer": "x", "citations": [], "confidence": 85}', "not a number in [0, 1]"),
    ('{"answer": "x", "citations": [], "confidence": true}', "not a number in [0, 1]"),
])
def test_parse_generation_rejects_what_the_schema_forbids(content, why):
    with pytest.raises(MalformedOutputError, match=re.escape(why)):
        parse_generation(content)


def test_parse_generation_accepts_a_fenced_object_and_dedups_citations():
    generation = parse_generation('```json\n{"answer": " About  $170. ", "citations": '
                                  '["en-1-0", 2, "en-1-0"], "confidence": 1, "note": "x"}\n```')
    assert generation.answer == "About $170."
    assert generation.citations == ["en-1-0", 2] and generation.confidence == 1.0


def test_filter_citations_keeps_supplied_ids_and_numbers_in_order():
    supplied = [Passage(f"en-1-{i}", "en", f"text {i}", 1, i) for i in range(3)]
    kept, dropped = filter_citations(["en-1-2", 1, "en-9-9", 4, "2", 3], supplied)
    assert [p.id for p in kept] == ["en-1-2", "en-1-0", "en-1-1"]
    assert dropped == ["en-9-9 (not supplied)", "4 (out of range 1..3)"]


def test_parse_generation_removes_lone_surrogates_and_control_characters():
    generation = parse_generation('{"answer": "Xbox 360 \\ud800cost\\u0007 $80", '
                                  '"citations": [1], "confidence": 0.5}')
    assert generation.answer == "Xbox 360 cost $80"
    generation.answer.encode("utf-8")  # storable


def test_filter_citations_drops_superscript_and_circled_digits():
    supplied = [Passage(f"en-1-{i}", "en", f"text {i}", 1, i) for i in range(3)]
    kept, dropped = filter_citations(["¹", "①", "२"], supplied)
    assert [p.id for p in kept] == ["en-1-1"]  # "२" is a Devanagari 2
    assert dropped == ["¹ (not supplied)", "① (not supplied)"]


def test_unsupported_facts_names_capitalised_words_missing_from_sources():
    sources = ["The Xbox 360 is made by Microsoft and costs $299."]
    assert unsupported_facts("Microsoft sells the Xbox for 299 dollars.", sources) == []
    assert unsupported_facts("Sony makes it. It sells in Japan.", sources) == ["Japan"]


def test_unsupported_facts_ignores_citation_marks_and_separators():
    sources = ["An Xbox 360 costs about $1000, or ₹२००."]
    assert unsupported_facts("It costs $1,000 [2] (en-331047-0), ₹200.", sources) == []
    assert unsupported_facts("Released in 2005 for $1000.", sources) == ["2005"]
    assert unsupported_facts("no numbers here", []) == []


# ----- the thread cap (issue 23) ---------------------------------------------------------------
async def test_generative_steps_run_under_the_extractive_thread_cap(small_pipeline, llm, client,
                                                                    monkeypatch):
    """Retrieval, grounding and the extractive fallback of generative answers run in the
    Answerer's executor (the bot's BOT_PIPELINE_THREADS pool), never two at once in a pool of
    one, as extractive answers do."""
    running, seen = [0, 0], []  # [now, most at once], (step, thread name)

    def counted(step, fn):
        def wrapper(*args, **kwargs):
            running[0] += 1
            running[1] = max(running[1], running[0])
            seen.append((step, threading.current_thread().name))
            try:
                time.sleep(0.02)  # long enough for concurrent asks to overlap if they could
                return fn(*args, **kwargs)
            finally:
                running[0] -= 1
        return wrapper

    for step in ("prepare", "ground_generated", "answer_extractive"):
        monkeypatch.setattr(small_pipeline, step, counted(step, getattr(small_pipeline, step)))
    for _ in range(2):
        llm.enqueue(Reply.answer(GROUNDED_EN, ["en-331047-0"]))
    for _ in range(2):
        llm.enqueue(Reply.answer("", []))  # empty: falls back to the extractive answer
    with ThreadPoolExecutor(1, thread_name_prefix="pipeline") as pool:
        answerer = Answerer(small_pipeline, client, executor=pool)
        results = await asyncio.gather(*(answerer.ask(XBOX_EN, lang="en", mode="generative")
                                         for _ in range(4)))

    assert sorted(r.mode for r in results) == ["extractive"] * 2 + ["generative"] * 2
    assert {step for step, _ in seen} == {"prepare", "ground_generated", "answer_extractive"}
    assert all(name.startswith("pipeline") for _, name in seen), seen
    assert running[1] == 1
