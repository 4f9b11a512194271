"""Issue 41: a score beside a floor is written so that the written numbers compare as the
numbers do (``rag.numbers.side_by_side``): never "0.850 is below the floor 0.850". The guard's
detail and the replies in four languages have their tests in tests/test_guards.py and
tests/test_render.py; the command line is here."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot.terminal.ask import ask_once, format_result
from rag.numbers import side_by_side
from rag.pipeline import Pipeline
from rag.types import Status

MARS = "what is the capital of mars"
"""Refused by the fake pipeline with a top cosine of 0.16689..., which rounds up to 0.167."""


@pytest.mark.parametrize(("score", "floor", "written"), [
    (0.8496, 0.85, ("0.8496", "0.850")),          # the case
    (0.84996, 0.85, ("0.84996", "0.850")),
    (0.85004, 0.85, ("0.85004", "0.850")),        # above, though it rounds to the floor
    (0.85, 0.85, ("0.850", "0.850")),             # equal, written equal
    (0.779, 0.84, ("0.779", "0.840")),            # three decimals when they suffice
    (0.9, 0.8425, ("0.900", "0.8425")),           # a floor set with four decimals keeps them
    (0.84249, 0.8425, ("0.842", "0.8425")),
    (0.8399999737739563, 0.84, ("0.8399999737739563", "0.840")),  # float32 0.84: in full
])
def test_side_by_side_writes_numbers_that_compare_as_the_numbers_do(score, floor, written):
    assert side_by_side(score, floor) == written
    score_text, floor_text = written
    assert (float(score_text) < float(floor_text)) == (score < floor)
    assert (float(score_text) == float(floor_text)) == (score == floor)


async def test_cli_refusal_whose_top_score_rounds_to_the_floor_shows_the_digits(
        fake_pipeline, fake_encoder):
    """``python -m bot ask`` prints :func:`format_result` of :func:`ask_once`: the reply and the
    relevance guard's trace line, both with the digits that tell the score from the floor."""
    score = (await ask_once(fake_pipeline, MARS)).top_score
    floor = round(score, 3)
    assert score < floor and f"{score:.3f}" == f"{floor:.3f}", (score, floor)
    pipeline = Pipeline(replace(fake_pipeline.settings, floor_en=floor), fake_encoder,
                        fake_pipeline.index, gate=None)
    result = await ask_once(pipeline, MARS)
    assert result.status is Status.REFUSED_NO_MATCH
    printed = format_result(result)
    shown = f"{score:.4f}"
    assert shown == "0.1669" and floor == 0.167
    assert f"best match {shown} is below the floor 0.167." in printed
    [guard] = [line for line in printed.splitlines() if "relevance_guard" in line]
    assert guard.endswith(f"top {shown} < floor 0.167 (en)")
