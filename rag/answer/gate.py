"""The answerability gate: typed logistic models, and the rules that turn their probability into
a verdict, written once over arrays: the product decides one row, ``scripts/fit_answering.py``
many, through the same functions.

After a passage clears the floor, does the selected answer state what was asked? The floors
alone cannot tell (off-corpus questions and near-misses, on topic but asking a fact no passage
states, score as high as answerable ones), so a logistic model over the question's signals
(``rag/answer/signals.py``) gives a probability, and two thresholds per language make it one of
three verdicts: **confident** (at least ``threshold``: the answer as it is), **hedged** (at
least ``hedge_threshold``: "not sure, the closest passage says …") or **refused**.

The gate file (``rag/gate_model.json``, written by ``scripts/fit_answering.py`` through
:meth:`GateModels.to_json`) holds three families of :class:`LogisticModel`:

- ``models``: per language (``all`` pooled, for a language without its own) over
  :data:`~rag.answer.signals.FEATURES`; its last signal needs an encoder call (the answer text
  embedded), so
- ``screen``: the same over :data:`~rag.answer.signals.SCREEN_FEATURES` decides alone where its
  probability is at least ``screen_band`` from both thresholds (:func:`screen_is_sure`);
- ``reader_models``: per language a reader reads, over the gate's signals and the reader's
  (:data:`~rag.answer.signals.READER_FEATURES`), with the weights that re-pick the answer among
  the candidates read (``pick``, :data:`PICK_SIGNALS`). No screen for those.

How each number was chosen (targets, bounds, folds) is in the file's ``cv`` entry and in
``scripts/fit_answering.py``; what they give: ``docs/benchmarks.md``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy.special import expit

from rag.answer.signals import (
    FEATURES,
    READER_FEATURES,
    READER_SIGNALS,
    SCREEN_FEATURES,
    GateFeatures,
    ReaderScores,
)
from rag.errors import ModelFileError
from rag.fitted import REFIT, read_model_file

MODEL_PATH = Path(__file__).resolve().parents[1] / "gate_model.json"

READER_TOP_K = 4
"""Candidates a reader reads per question (the selector's best first) when the gate file does
not say (its ``reader_top_k``: chosen by ``scripts/fit_answering.py`` as the smallest k whose
top k holds the answer span for at least ``READER_SPAN_SHARE`` of the English training questions
whose candidates hold it at all)."""

READ_LATER = ("answer_cosine", *READER_SIGNALS)
"""The signals a reader model needs beyond the screen's, each a model call away (the answer
embedded; the reader run): what :meth:`LogisticModel.ceiling` bounds before reading."""
BOUND_MARGIN = 0.25
"""How far a reader model's bounds reach beyond the range its fit saw, as a share of that range
on each side: a question whose signals fall outside it is rare, and the ceiling stays a bound."""

PICK_SIGNALS = ("selector_logit", "reader_logit")
"""What :func:`pick_order` weighs per candidate read: the selector's logit, ln(p / (1 - p)) of
its probability (rag/selection.py), and the reader's logit; one weight each per reader, fitted
by ``scripts/fit_answering.py`` (a logistic model over the candidates read of the training
questions, positive where the candidate holds the answer span). A rank or margin signal beside
the two added nothing when it was designed (docs/benchmarks.md)."""


# --- the rules, over arrays ------------------------------------------------------------------

def probabilities(x: np.ndarray, mean: np.ndarray, scale: np.ndarray, coef: np.ndarray,
                  intercept: float) -> np.ndarray:
    """p = sigmoid(((x - mean) / scale) · coef + intercept), float64 (n,) for ``x`` (n, d) or
    (d,). Each row's sum runs in the same order whatever n is (``einsum``, not a BLAS product
    whose blocking depends on n), so one question decided alone and the same question among a
    fit's thousands get the same probability to the bit."""
    z = (np.atleast_2d(np.asarray(x, dtype=np.float64)) - mean) / scale
    return expit(np.einsum("ij,j->i", z, coef) + intercept)


def verdict_kinds(p: np.ndarray, threshold: np.ndarray | float,
                  hedge_threshold: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """(confident, hedged), bool arrays shaped as ``p``: confident where ``p >= threshold``,
    hedged where not confident and ``p >= hedge_threshold`` (a hedge threshold equal to the
    confident one hedges nothing); NaN is neither (refused)."""
    p = np.asarray(p, dtype=np.float64)
    confident = p >= threshold
    return confident, ~confident & (p >= hedge_threshold)


def screen_is_sure(p: np.ndarray, threshold: np.ndarray | float,
                   hedge_threshold: np.ndarray | float, band: float) -> np.ndarray:
    """Bool array shaped as ``p``: the screen's probability is finite and at least ``band`` from
    both its thresholds, so it decides without the answer's embedding."""
    p = np.asarray(p, dtype=np.float64)
    return np.isfinite(p) & (np.abs(p - threshold) >= band) & (np.abs(p - hedge_threshold) >= band)


def pick_order(probabilities_: Sequence[float], scores: Sequence[float],
               weights: Sequence[float]) -> list[int]:
    """The candidates read, best first: indices into ``scores`` (a reader's logits, in the
    selector's order) by ``weights[0]`` x the selector's logit of ``probabilities_[i]`` (0-1,
    clipped to [1e-6, 1 - 1e-6]) + ``weights[1]`` x ``scores[i]``; ties keep the selector's
    order."""
    def combined(i: int) -> float:
        p = min(max(probabilities_[i], 1e-6), 1 - 1e-6)
        return weights[0] * math.log(p / (1 - p)) + weights[1] * scores[i]

    return sorted(range(len(scores)), key=lambda i: -combined(i))


# --- the typed models -------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class LogisticModel:
    """One fitted model: p = sigmoid(coef · (x − mean) / scale + intercept) over a fixed list of
    signals (``mean``, ``scale``, ``coef``: float64 (d,)); ``threshold`` the confident one,
    ``hedge_threshold`` the hedged band's floor (at most ``threshold``; None: nothing hedged),
    ``target`` the share of right natural answers the threshold keeps (a record of how it was
    chosen), ``pick`` the re-pick weights (:data:`PICK_SIGNALS`) of a reader model."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    threshold: float
    hedge_threshold: float | None = None
    target: float | None = None
    pick: tuple[float, ...] | None = None
    bounds: tuple[tuple[float, float], ...] | None = None
    """A reader model's: the range (lo, hi) of each signal it reads after the screen's
    (``answer_cosine`` and the reader's, :data:`READ_LATER`), as seen in its fit and widened by
    :data:`BOUND_MARGIN`; :meth:`ceiling` bounds its probability before they are computed."""

    def probability(self, x: np.ndarray) -> np.ndarray:
        """float64 (n,) for ``x`` (n, d) or (d,) (:func:`probabilities`)."""
        return probabilities(x, self.mean, self.scale, self.coef, self.intercept)

    @property
    def hedge(self) -> float:
        """The hedged band's floor as the rules take it (the confident threshold: none)."""
        return self.threshold if self.hedge_threshold is None else self.hedge_threshold

    def ceiling(self, x: np.ndarray) -> np.ndarray:
        """float64 (n,): the highest probability this reader model can give rows whose first
        len(SCREEN_FEATURES) signals are ``x`` (n, len(SCREEN_FEATURES)), whatever the rest
        (:data:`READ_LATER`) are within :attr:`bounds`; 1.0 without bounds."""
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        if self.bounds is None:
            return np.ones(len(x))
        k = x.shape[1]
        known = np.einsum("ij,j->i", (x - self.mean[:k]) / self.scale[:k], self.coef[:k])
        w = self.coef[k:] / self.scale[k:]
        lo, hi = (np.array([b[j] for b in self.bounds]) - self.mean[k:] for j in (0, 1))
        return expit(known + float(np.maximum(w * lo, w * hi).sum()) + self.intercept)

    def kinds(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(confident, hedged) for probabilities ``p`` (:func:`verdict_kinds`)."""
        return verdict_kinds(p, self.threshold, self.hedge)

    def is_screened(self, p: np.ndarray, band: float) -> np.ndarray:
        """Where this screen decides alone (:func:`screen_is_sure`)."""
        return screen_is_sure(p, self.threshold, self.hedge, band)

    def to_json(self) -> dict:
        """The gate file's record: mean, scale, coef, intercept, threshold, then the optional
        hedge_threshold, target and pick."""
        out = {"mean": self.mean.tolist(), "scale": self.scale.tolist(),
               "coef": self.coef.tolist(), "intercept": self.intercept,
               "threshold": self.threshold}
        for key in ("hedge_threshold", "target"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.pick is not None:
            out["pick"] = list(self.pick)
        if self.bounds is not None:
            out["bounds"] = [list(b) for b in self.bounds]
        return out

    @classmethod
    def from_json(cls, data: object, where: str, n_features: int) -> LogisticModel:
        """The model of a gate-file record ``data`` (``where`` names it in an error).

        Raises:
            ValueError: what is wrong, e.g. ``models['hi']['coef'] is not a list of 11
                numbers``.
        """
        if not isinstance(data, dict):
            raise ValueError(f"{where} is not an object")
        for key in ("mean", "scale", "coef"):
            if not _numbers(data.get(key), n_features):
                raise ValueError(f"{where}[{key!r}] is not a list of {n_features} numbers")
        for key in ("intercept", "threshold"):
            if not _is_number(data.get(key)):
                raise ValueError(f"{where}[{key!r}] is not a number")
        hedge = data.get("hedge_threshold")
        if hedge is not None and not (_is_number(hedge) and hedge <= data["threshold"]):
            raise ValueError(f"{where}['hedge_threshold'] is not a number at most its threshold")
        pick = data.get("pick")
        if pick is not None and not _numbers(pick, len(PICK_SIGNALS)):
            raise ValueError(f"{where}['pick'] is not a list of {len(PICK_SIGNALS)} numbers")
        bounds = data.get("bounds")
        if bounds is not None and not (isinstance(bounds, list) and len(bounds) == len(READ_LATER)
                                       and all(_numbers(b, 2) and b[0] <= b[1] for b in bounds)):
            raise ValueError(f"{where}['bounds'] is not {len(READ_LATER)} pairs [lo, hi]")
        return cls(np.asarray(data["mean"], dtype=np.float64),
                   np.asarray(data["scale"], dtype=np.float64),
                   np.asarray(data["coef"], dtype=np.float64), data["intercept"],
                   data["threshold"], hedge, data.get("target"),
                   None if pick is None else tuple(pick),
                   None if bounds is None else tuple(tuple(b) for b in bounds))


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _numbers(x: object, n: int) -> bool:
    return isinstance(x, list) and len(x) == n and all(_is_number(v) for v in x)


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
    is_unread: bool = False
    """Refused before reading: whatever the reader said, the probability could not reach the
    hedge threshold (``probability`` is that ceiling)."""

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
        if self.is_unread:
            verdict = f"at most {verdict} whatever the reader reads (not read)"
        if self.reading is not None:
            verdict += f" (reader's model; {self.reading.describe()})"
        return f"{verdict}; {self.features.describe()}"


@dataclass(frozen=True, slots=True)
class GateModels:
    """The fitted gate (see the module): ``models`` and ``screen`` by language (``all``
    required: the pooled model of a language without its own), ``screen_band`` a probability
    distance (0-1), ``reader_models`` by language read, ``reader_top_k`` the candidates a reader
    reads, ``meta`` what the file records of its fit (encoder, retrieval, data, folds), kept as
    written."""

    models: dict[str, LogisticModel]
    screen: dict[str, LogisticModel]
    screen_band: float
    reader_models: dict[str, LogisticModel] = field(default_factory=dict)
    reader_top_k: int = READER_TOP_K
    meta: dict = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path = MODEL_PATH) -> GateModels:
        """The gate fitted in ``path``, every model checked.

        Raises:
            ModelFileError: the file is missing, unreadable, fitted for other signals, or a
                model is not shaped as :meth:`LogisticModel.from_json` reads it (named, with
                the refit command), so start-up stops with one line instead of a question
                failing later.
        """
        data = read_model_file(path, FEATURES, ("models", "screen", "screen_band"))
        try:
            return cls.from_json(data)
        except ValueError as exc:
            raise ModelFileError(f"model file {path}: {exc}: rerun {REFIT}") from None

    @classmethod
    def from_json(cls, data: dict) -> GateModels:
        """Raises ValueError naming what is wrong (see :meth:`load`)."""
        models = _family(data["models"], "models", len(FEATURES))
        screen = _family(data["screen"], "screen", len(SCREEN_FEATURES))
        if set(models) != set(screen):
            # a language with its own gate but the pooled screen would screen by another policy
            raise ValueError(f"models ({', '.join(sorted(models))}) and screen "
                             f"({', '.join(sorted(screen))}) cover different languages")
        band = data["screen_band"]
        if not _is_number(band) or not 0 <= band <= 1:
            raise ValueError("screen_band is not a number from 0 to 1")
        readers = data.get("reader_models", {})
        if not isinstance(readers, dict):
            raise ValueError("reader_models is not an object")
        if readers and data.get("reader_features") != list(READER_FEATURES):
            raise ValueError(f"reader_models were fitted for {data.get('reader_features')}, the "
                             f"code computes {list(READER_FEATURES)}")
        reader_models = {lang: LogisticModel.from_json(m, f"reader_models[{lang!r}]",
                                                       len(READER_FEATURES))
                         for lang, m in readers.items()}
        top_k = data.get("reader_top_k", READER_TOP_K)
        if reader_models and (not isinstance(top_k, int) or isinstance(top_k, bool)
                              or top_k < 1):
            raise ValueError("reader_top_k is not a positive whole number")
        known = {"features", "models", "screen", "screen_band", "reader_features",
                 "reader_models", "reader_top_k"}
        return cls(models, screen, float(band), reader_models,
                   int(top_k) if reader_models else READER_TOP_K,
                   {k: v for k, v in data.items() if k not in known})

    def to_json(self) -> dict:
        """The gate file's object, in its order (``meta`` last)."""
        return {"features": list(FEATURES),
                "models": {k: m.to_json() for k, m in self.models.items()},
                "screen": {k: m.to_json() for k, m in self.screen.items()},
                "screen_band": self.screen_band,
                "reader_features": list(READER_FEATURES),
                "reader_models": {k: m.to_json() for k, m in self.reader_models.items()},
                "reader_top_k": self.reader_top_k,
                **self.meta}

    def write(self, path: Path = MODEL_PATH) -> None:
        """Write :meth:`to_json` to ``path`` (one space of indent, as the project's fitted
        files), then read it back through :meth:`load`."""
        Path(path).write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")
        type(self).load(path)

    def reads(self, lang: str) -> bool:
        """Whether ``lang``'s questions are gated with a reader's signals."""
        return lang in self.reader_models

    def pick_weights(self, lang: str) -> tuple[float, ...] | None:
        """``lang``'s reader model's re-pick weights, None when it has none (the selector's
        pick stands)."""
        model = self.reader_models.get(lang)
        return None if model is None else model.pick

    def gate_model(self, lang: str) -> LogisticModel:
        return self.models.get(lang) or self.models["all"]

    def screen_model(self, lang: str) -> LogisticModel:
        return self.screen.get(lang) or self.screen["all"]

    def decisions(self, langs: Sequence[str], x: np.ndarray, reader_x: np.ndarray | None = None,
                  read_langs: Iterable[str] | None = None,
                  ceiling_x: np.ndarray | None = None) -> Decisions:
        """The verdicts of n questions at once, by the one rule the product and the fit share.

        A question in a language a reader model covers (and, with ``read_langs``, one of those)
        is refused unread where that model cannot reach its hedge threshold whatever the reader
        says (:meth:`LogisticModel.ceiling` over its first signals: ``skipped``); else decided
        by the model over its ``reader_x`` row (``needs_reading`` while that row is NaN). Any
        other question is decided by the screen where it is sure (:func:`screen_is_sure`), else
        by the full gate.

        Args:
            langs: n question languages.
            x: float64 (n, len(FEATURES)), the gate's signals; ``answer_cosine`` (the last) may
                be NaN where not computed: a row that needs it is then ``needs_cosine``
                (neither confident nor hedged).
            reader_x: float64 (n, len(READER_SIGNALS)), NaN rows where not read; None: nothing
                was read.
            read_langs: the languages a reader can read here (None: every one with a model).
            ceiling_x: the signals the ceiling is taken on, where they differ from ``x`` (the
                fit's: before the reader re-picked the answer, as the product takes it).
        """
        langs = np.asarray(langs)
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        cx = x if ceiling_x is None else np.atleast_2d(np.asarray(ceiling_x, dtype=np.float64))
        n = len(langs)
        rx = np.full((n, len(READER_SIGNALS)), np.nan) if reader_x is None else \
            np.atleast_2d(np.asarray(reader_x, dtype=np.float64))
        p, t, h, full_p, full_t = (np.full(n, np.nan) for _ in range(5))
        screened, read, skipped = (np.zeros(n, bool) for _ in range(3))
        readable = set(self.reader_models if read_langs is None else read_langs)
        for lang in dict.fromkeys(langs.tolist()):
            rows = langs == lang
            if lang in self.reader_models and lang in readable:
                m = self.reader_models[lang]
                ceiling = m.ceiling(cx[rows][:, :len(SCREEN_FEATURES)])
                skipped[rows] = ceiling < m.hedge
                full_p[rows] = np.where(skipped[rows], ceiling, m.probability(
                    np.hstack([x[rows], rx[rows]])))
                read[rows] = ~skipped[rows] & np.isfinite(rx[rows]).all(axis=1)
                t[rows], h[rows], full_t[rows] = m.threshold, m.hedge, m.threshold
                p[rows] = np.where(skipped[rows] | read[rows], full_p[rows], np.nan)
                continue
            sm, gm = self.screen_model(lang), self.gate_model(lang)
            ps = sm.probability(x[rows][:, :len(SCREEN_FEATURES)])
            sure = sm.is_screened(ps, self.screen_band)
            full_p[rows], full_t[rows] = gm.probability(x[rows]), gm.threshold
            p[rows] = np.where(sure, ps, full_p[rows])
            t[rows] = np.where(sure, sm.threshold, gm.threshold)
            h[rows] = np.where(sure, sm.hedge, gm.hedge)
            screened[rows] = sure
        is_reader = np.isin(langs, [lang for lang in self.reader_models if lang in readable])
        confident, hedged = verdict_kinds(p, t, h)
        return Decisions(p, t, h, confident, hedged, screened, read,
                         ~screened & ~skipped & np.isnan(x[:, -1]) & (read | ~is_reader),
                         full_p >= full_t, skipped, is_reader & ~skipped & ~read)

    def verdict(self, features: GateFeatures, lang: str, reading: ReaderScores | None = None,
                can_read: bool = False) -> GateVerdict | None:
        """One question's verdict by :meth:`decisions`; None while it needs more: the answer's
        embedding (``features.answer_cosine`` None and the screen not sure) or, with
        ``can_read`` (a reader reads ``lang``), the reader's scores (``reading`` None and the
        reader model's ceiling over its hedge threshold). Embed or read, then ask again.

        Raises:
            ValueError: a signal is NaN or infinite (it would otherwise refuse without saying
                why).
        """
        x = features.vector() if features.answer_cosine is not None else \
            np.append(features.vector(SCREEN_FEATURES), np.nan)
        described = features.describe()
        reader_x = None
        if reading is not None:
            reader_x = reading.vector()[None, :]
            described += f"; {reading.describe()}"
        if not (np.isfinite(x[:-1]).all() and (reader_x is None or np.isfinite(reader_x).all())
                and (features.answer_cosine is None or math.isfinite(x[-1]))):
            raise ValueError(f"gate signals are not all finite: {described}")
        d = self.decisions([lang], x[None, :], reader_x, [lang] if can_read else ())
        if d.needs_cosine[0] or d.needs_reading[0]:
            return None
        is_read, is_skipped = bool(d.read[0]), bool(d.skipped[0])
        model = self.reader_models[lang] if is_read or is_skipped else \
            self.screen_model(lang) if d.screened[0] else self.gate_model(lang)
        return GateVerdict(bool(d.confident[0]), float(d.p[0]), float(d.threshold[0]), features,
                           bool(d.screened[0]), bool(d.hedged[0]), model.hedge_threshold,
                           reading if is_read else None, is_skipped)


class Decisions(NamedTuple):
    """The gate's decisions on n rows (:meth:`GateModels.decisions`), each array (n,): the
    probability that decided and its two thresholds, confident / hedged (:func:`verdict_kinds`),
    ``screened`` (the screen decided alone), ``read`` (a reader model decided),
    ``needs_cosine`` (neither: the full gate needs ``answer_cosine``, not computed),
    ``full_confident``, the confident verdict of the model that decides without the screen,
    ``skipped`` (refused unread: the reader model's ceiling is under its hedge threshold) and
    ``needs_reading`` (a reader model decides, its reader has not read yet)."""

    p: np.ndarray
    threshold: np.ndarray
    hedge_threshold: np.ndarray
    confident: np.ndarray
    hedged: np.ndarray
    screened: np.ndarray
    read: np.ndarray
    needs_cosine: np.ndarray
    full_confident: np.ndarray
    skipped: np.ndarray
    needs_reading: np.ndarray


def _family(models: object, name: str, n_features: int) -> dict[str, LogisticModel]:
    if not isinstance(models, dict) or "all" not in models:
        raise ValueError(f"{name} lacks the pooled model 'all'")
    return {lang: LogisticModel.from_json(m, f"{name}[{lang!r}]", n_features)
            for lang, m in models.items()}


