"""Scores and floors written side by side, so that the written numbers compare as the numbers do.

At three decimals a top cosine of 0.8496 against the floor 0.850 reads "0.850 is below the
floor 0.850". :func:`side_by_side` writes the floor as it was set (three decimals, more only when
it has them) and the score with as many decimals as it takes for the written score to be below,
equal to or above the written floor exactly as the score is to the floor: "0.8496 < 0.850".
Every place that puts a score beside a floor (the relevance guard's trace detail, the replies in
four languages, the command line) writes both through it.
"""

from __future__ import annotations

MIN_DECIMALS = 3
"""Decimals of a score or floor that needs no more: cosines and floors are read at 0.001 (the
floors are set to three decimals, ``rag.settings``)."""
MAX_DECIMALS = 7
"""Most decimals written before falling back to Python's shortest round-trip form: scores are
float32 cosines (usearch, numpy), whose spacing near 1 is 6e-8, so a difference that 7 decimals
cannot show is a difference of a bit or two."""


def side_by_side(score: float, floor: float) -> tuple[str, str]:
    """``(score, floor)`` as text for "score < floor", "score >= floor" and the like.

    The floor gets :data:`MIN_DECIMALS` decimals, or up to :data:`MAX_DECIMALS` when it needs them
    to be written exactly (a floor of 0.8425 stays 0.8425). The score gets the fewest decimals
    (at least :data:`MIN_DECIMALS`) at which the written score and the written floor compare as
    ``score`` and ``floor`` do (<, == or >): 0.8496 vs 0.85 gives ``("0.8496", "0.850")``,
    0.85004 vs 0.85 ``("0.85004", "0.850")``, 0.779 vs 0.84 ``("0.779", "0.840")``. Where even
    :data:`MAX_DECIMALS` do not tell them apart, the score is written in full (``repr``: the
    float32 nearest 0.84, 0.8399999737739563, against the floor 0.840), and so is a floor that
    its decimals could not write exactly.
    """
    floor_text = _exact(floor)
    written_floor = float(floor_text)
    for decimals in range(MIN_DECIMALS, MAX_DECIMALS + 1):
        score_text = f"{score:.{decimals}f}"
        if _order(float(score_text), written_floor) == _order(score, floor):
            return score_text, floor_text
    return repr(float(score)), floor_text if written_floor == floor else repr(float(floor))


def _exact(value: float) -> str:
    """``value`` with the fewest decimals from :data:`MIN_DECIMALS` to :data:`MAX_DECIMALS`
    that write it to within 1e-9 (a floor set as 0.84 that went through float arithmetic)."""
    for decimals in range(MIN_DECIMALS, MAX_DECIMALS + 1):
        text = f"{value:.{decimals}f}"
        if abs(float(text) - value) <= 1e-9:
            return text
    return f"{value:.{MAX_DECIMALS}f}"


def _order(a: float, b: float) -> int:
    return (a > b) - (a < b)
