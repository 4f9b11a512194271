"""What the answer stage decides on: the gate's signals of one question and its reader's.

Two named rows, each with its ``vector()`` in the order of the fitted coefficients:

- :class:`GateFeatures` (:data:`FEATURES`): the question's top cosine and its distance to the
  floor, the selected answer's probability, coverage and margin (``rag/selection.py``), whether
  the question asks for a number or date the answer lacks, the best coverage of the question in
  any retrieved passage, the cosine between the question's vector and the shown answer text's,
  and how the question was put (:class:`QuestionStyle`);
- :class:`ReaderScores` (:data:`READER_SIGNALS`): a reader's logits of the candidates it read,
  summarised as the pick's, the best, the margin and whether they agree.

Why each signal is there and what it earns out of fold: ``docs/benchmarks.md`` (printed by
``scripts/fit_answering.py``). The earlier ``group_agreement`` signal (share of hits from the top
hit's MS MARCO query group) is gone: real questions do not share the dataset's ten passages per
query.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import numpy as np

from rag.romanized import is_romanized_hindi, to_devanagari
from rag.selection import Selection
from rag.text import strip_fillers, tokenize
from rag.types import Hit

FEATURES = (
    "top_score",
    "over_floor",
    "answer_probability",
    "answer_idf_coverage",
    "kind_missing",
    "answer_margin",
    "passage_coverage",
    "answer_passage_coverage",
    "latin_share",
    "romanized",
    "has_filler",
    "answer_cosine",
)
"""The gate's signals, in the order of the fitted coefficients (``features`` in the gate file).
``answer_cosine`` needs one encoder call (the shown answer text embedded as a passage), so it is
last: the screen is the same model over the others."""

SCREEN_FEATURES = FEATURES[:-1]
"""The signals that need no model call: the screen's inputs."""

READER_SIGNALS = ("reader_pick", "reader_best", "reader_margin", "reader_agrees")
"""The gate's reader signals (:class:`ReaderScores`), in the order of the fitted coefficients."""

READER_FEATURES = FEATURES + READER_SIGNALS
"""A reader model's inputs (``reader_features`` in the gate file): the gate's and the reader's."""

_LATIN_TOKEN = re.compile(r"[a-z]+")


@dataclass(frozen=True, slots=True)
class QuestionStyle:
    """How a question was put, as the pipeline reads it (:func:`question_style`): the share of
    its searched words in Latin letters (0 for English; 1 for Hindi typed in Latin letters that
    the lexicon did not read), whether it was Hindi typed in Latin letters (0/1), and whether
    spoken fillers were removed from it (0/1). The other signals run lower for such questions
    whether or not the answer is right, so the gate weighs them. The default is a question typed
    in its own script."""

    latin_share: float = 0.0
    romanized: float = 0.0
    has_filler: float = 0.0


def question_style(asked: str, lang: str) -> QuestionStyle:
    """The :class:`QuestionStyle` of ``asked`` (the question as received) in ``lang``, read the
    way ``Pipeline._language`` reads it: Hindi in Latin letters in Devanagari, then fillers
    removed; ``latin_share`` is over the searched text's word tokens (digits left out)."""
    text = asked
    romanized = lang == "hi" and is_romanized_hindi(asked)
    if romanized:
        text = to_devanagari(asked)
    searched = strip_fillers(text, lang)
    words = [t for t in tokenize(searched) if not t.isdigit()]
    latin = 0.0 if lang == "en" or not words else \
        sum(bool(_LATIN_TOKEN.fullmatch(t)) for t in words) / len(words)
    return QuestionStyle(latin, float(romanized), float(searched != text))


TYPED = QuestionStyle()
"""A question typed in its own script."""


@dataclass(frozen=True, slots=True)
class GateFeatures:
    """Signals of one question that cleared the floor: the top hit's cosine and its distance to
    the floor; the selected answer's probability of stating the answer (rag/selection.py, 0-1),
    the IDF-weighted share of the question's content words it contains (0-1), whether the
    question asks for a number or a date that the answer lacks (0/1), the probability margin
    over the runner-up candidate, the largest IDF-weighted share of the question's content
    words found in any retrieved passage (a near-miss asks about a word none of them has), and
    the cosine between the question's vector and the shown answer text's (embedded as a
    passage by the same encoder; 0 when there is no answer text; None while not computed, as
    when the screen decides alone), and the question's :class:`QuestionStyle` (after
    ``answer_cosine`` here, for positional construction; before it in :data:`FEATURES`)."""

    top_score: float
    over_floor: float
    answer_probability: float
    answer_idf_coverage: float
    kind_missing: float
    answer_margin: float
    passage_coverage: float
    answer_cosine: float | None
    latin_share: float = 0.0
    romanized: float = 0.0
    has_filler: float = 0.0
    answer_passage_coverage: float = 0.0
    """The IDF-weighted share of the question's content words in the passage the answer is read
    from (0-1): the topic evidence of this answer, where ``passage_coverage`` is the best of any
    hit's (issue 42: a hedged answer from a passage that shares one common word with the
    question, "grams" for a question about kilograms, is the case this tells apart)."""

    def vector(self, names: tuple[str, ...] = FEATURES) -> np.ndarray:
        """The fitted model's inputs, float64 (len(names),): ``FEATURES`` for the gate (needs
        ``answer_cosine``), ``SCREEN_FEATURES`` for the screen."""
        return np.array([getattr(self, name) for name in names], dtype=np.float64)

    def describe(self) -> str:
        return ", ".join(f"{k} {v:.3f}" if v is not None else f"{k} not computed"
                         for k, v in asdict(self).items())


def gate_features(hits: list[Hit], selection: Selection | None, floor: float,
                  answer_cosine: float | None, style: QuestionStyle = TYPED) -> GateFeatures:
    """Compute the gate's signals; ``hits`` is non-empty, best first; ``answer_cosine`` the
    cosine between the question's and ``selection.text``'s vectors, None when not computed yet
    (ignored without a selection: the signal is then 0); ``style`` from :func:`question_style`
    (default: typed in its own script)."""
    top = hits[0].score
    how = (style.latin_share, style.romanized, style.has_filler)
    if selection is None:
        return GateFeatures(top, top - floor, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, *how, 0.0)
    best, runner_up = selection.best, selection.runner_up
    missing = best.features.asks_number_missing or best.features.asks_date_missing
    return GateFeatures(
        top_score=top,
        over_floor=top - floor,
        answer_probability=best.probability,
        answer_idf_coverage=best.features.idf_coverage,
        kind_missing=float(missing),
        answer_margin=best.probability - (runner_up.probability if runner_up else 0.0),
        passage_coverage=selection.passage_coverage,
        answer_cosine=answer_cosine,
        latin_share=style.latin_share,
        romanized=style.romanized,
        has_filler=style.has_filler,
        answer_passage_coverage=best.features.passage_idf_coverage,
    )


@dataclass(frozen=True, slots=True)
class ReaderScores:
    """A reader's reading of one question: ``scores`` the logits of the candidates read, in
    the pick's order (index 0 is the pick); the gate's signals: ``reader_pick`` (the pick's
    logit), ``reader_best`` (the highest), ``reader_margin`` (highest minus the runner-up; 0
    with one candidate), ``reader_agrees`` (1.0 when the highest is the pick)."""

    scores: tuple[float, ...]
    reader_pick: float
    reader_best: float
    reader_margin: float
    reader_agrees: float

    def vector(self) -> np.ndarray:
        """float64 (len(READER_SIGNALS),)."""
        return np.array([getattr(self, name) for name in READER_SIGNALS], dtype=np.float64)

    def describe(self) -> str:
        shown = ", ".join(f"{s:.2f}" for s in self.scores)
        return (f"reader pick {self.reader_pick:.2f}, best {self.reader_best:.2f}, margin "
                f"{self.reader_margin:.2f}, agrees {int(self.reader_agrees)}; "
                f"scores [{shown}]")


NO_READING = ReaderScores((), 0.0, 0.0, 0.0, 0.0)
"""The signals of a question with no candidate sentence."""


def reader_signals(scores: np.ndarray | list[float] | tuple[float, ...]) -> ReaderScores:
    """The gate's signals from the logits of the candidates read (the pick first)."""
    s = [float(x) for x in scores]
    if not s:
        return NO_READING
    order = sorted(range(len(s)), key=lambda i: -s[i])
    best = s[order[0]]
    margin = best - s[order[1]] if len(s) > 1 else 0.0
    return ReaderScores(tuple(s), s[0], best, margin, float(order[0] == 0))
