"""rag.answering.Answerer, the one entry point for either answer mode, over the fake pipeline
(tests/fakes.py) with a scripted chat model in place of OpenRouter."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from rag.answering import Answerer
from rag.errors import ServiceError
from rag.prompt import Completion
from rag.types import FallbackCode, Status, Turn

XBOX_EN = "How much does an Xbox 360 cost?"
PASSAGE = re.compile(r'<passage id="([^"]+)" n="\d+" lang="\w+">\n(.*?)\n</passage>', re.DOTALL)


class EchoGenerator:
    """A chat model that answers with the first sentence of the first passage it is given and
    cites that passage; records the messages of every call. With ``error`` it raises instead."""

    def __init__(self, error: ServiceError | None = None) -> None:
        self.error = error
        self.calls: list[list[dict[str, str]]] = []

    async def complete(self, messages: list[dict[str, str]]) -> Completion:
        self.calls.append(messages)
        if self.error is not None:
            raise self.error
        passage_id, text = PASSAGE.findall(messages[1]["content"])[0]
        answer = text.split(". ")[0].rstrip(".") + "."
        content = json.dumps({"answer": answer, "citations": [passage_id], "confidence": 0.9})
        return Completion(content, model="echo", elapsed_ms=1.0)


class RecordingExecutor(ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(1)
        self.n_submitted = 0

    def submit(self, fn, /, *args, **kwargs):
        self.n_submitted += 1
        return super().submit(fn, *args, **kwargs)


async def test_extractive_mode_is_the_pipeline_answer_run_in_the_executor(fake_pipeline):
    with RecordingExecutor() as executor:
        result = await Answerer(fake_pipeline, executor=executor).ask(XBOX_EN, lang="en")
    expected = fake_pipeline.ask(XBOX_EN, lang="en")
    assert executor.n_submitted == 1
    assert result.status is Status.ANSWERED and result.mode == "extractive"
    assert result.answer == expected.answer
    assert [c.passage_id for c in result.citations] == [c.passage_id for c in expected.citations]


async def test_generative_mode_shows_the_models_cited_answer_from_the_top_passages(
        fake_pipeline):
    generator = EchoGenerator()
    answerer = Answerer(fake_pipeline, generator, max_passages=2)

    result = await answerer.ask(XBOX_EN, lang="en", mode="generative")

    [messages] = generator.calls
    supplied = [passage_id for passage_id, _ in PASSAGE.findall(messages[1]["content"])]
    assert len(supplied) == 2
    assert result.status is Status.ANSWERED and result.mode == "generative"
    assert [c.passage_id for c in result.citations] == supplied[:1]
    assert result.trace.get("generate").decision == "ok" and result.fallback is None


async def test_a_failed_model_falls_back_to_the_extractive_answer_with_its_code(fake_pipeline):
    answerer = Answerer(fake_pipeline, EchoGenerator(ServiceError("echo", "timeout", "slow")))

    result = await answerer.ask(XBOX_EN, lang="en", mode="generative")

    assert result.status is Status.ANSWERED and result.mode == "extractive"
    assert result.fallback is FallbackCode.TIMEOUT
    assert result.answer == fake_pipeline.ask(XBOX_EN, lang="en").answer


async def test_generative_mode_without_a_model_or_an_unknown_mode_is_refused(fake_pipeline):
    with pytest.raises(ValueError, match="needs a generator"):
        await Answerer(fake_pipeline).ask(XBOX_EN, mode="generative")
    with pytest.raises(ValueError, match="unknown answer mode 'creative'"):
        await Answerer(fake_pipeline, EchoGenerator()).ask(XBOX_EN, mode="creative")


CUCUMBER_EN = "How many calories are in a small cucumber?"
BIG_ONE = "and a big one?"
"""Refused alone by the fake pipeline (top 0.209 < floor 0.25); read after the cucumber
question, searched as "calories small cucumber big one" (tests.fakes.read_followup)."""


async def test_a_follow_up_is_read_with_the_previous_turn_in_either_mode(fake_pipeline):
    turn = Turn(CUCUMBER_EN, "en")
    alone = await Answerer(fake_pipeline).ask(BIG_ONE)
    assert alone.status is Status.REFUSED_NO_MATCH and alone.followup is None

    generator = EchoGenerator()
    extractive = await Answerer(fake_pipeline).ask(BIG_ONE, after=turn)
    generative = await Answerer(fake_pipeline, generator).ask(BIG_ONE, mode="generative",
                                                              after=turn)
    as_text = await Answerer(fake_pipeline).ask(BIG_ONE, after=CUCUMBER_EN)  # --after's form
    assert (extractive.mode, generative.mode) == ("extractive", "generative")
    for result in (extractive, generative, as_text):
        assert result.shows_answer and result.query == BIG_ONE
        assert result.followup.is_followup
        assert result.searched == result.followup.searched == "calories small cucumber big one"
        assert result.citations[0].passage_id.startswith("en-59804-")  # the cucumber passages
        assert result.trace.stages[0].name == "followup"
    [messages] = generator.calls
    assert "cucumber" in messages[1]["content"].lower()

