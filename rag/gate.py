"""Answerability gate: after a passage clears the floor, does the retrieved text answer the query?

The floors alone cannot tell answerable from unanswerable questions (off-corpus and "No Answer
Present" questions score as high as answerable ones), so this gate looks at cheap signals of the
retrieved text itself and combines them in a small logistic model fitted on the shared sample by
``scripts/fit_gate.py`` (cross-validated by query_id; the coefficients and the measured numbers
live in ``rag/gate_model.json``). It costs no model call: a few set operations and a dot product.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from rag.text import content_tokens, coverage
from rag.types import Hit

MODEL_PATH = Path(__file__).with_name("gate_model.json")

FEATURES = ("top_score", "over_floor", "sentence_coverage", "group_agreement")
"""Signals that earned their place (scripts/fit_gate.py, docs/benchmarks.md): the margin to
the next hit, coverage by the whole passage, a quantity-question/number check, the parallel
translation's score and the query length were measured too and added nothing out of fold
(ROC AUC 0.918 with all nine vs 0.922 with these four, on 1,093 cases of an earlier checkout;
0.921 for these four on this one). Against "No Answer Present" questions
(scripts/probe_unanswerable.py), IDF-weighted coverage and BM25 changed nothing when added, and
the top-k spread's gain did not survive a nested check."""


@dataclass(frozen=True, slots=True)
class GateFeatures:
    """Signals of one (query, hits, best sentence): the top hit's cosine and its distance to the
    floor; ``sentence_coverage``, the share of the query's content tokens found in the best
    sentence of the top passage (0–1); ``group_agreement``, the share of hits from the top hit's
    MS MARCO query group (passages written for one question cluster when it is answerable)."""

    top_score: float
    over_floor: float
    sentence_coverage: float
    group_agreement: float

    def vector(self) -> np.ndarray:
        """The fitted model's inputs, float64 (len(FEATURES),)."""
        return np.array([getattr(self, name) for name in FEATURES], dtype=np.float64)

    def describe(self) -> str:
        return ", ".join(f"{k} {v:.3f}" for k, v in asdict(self).items())


def gate_features(
    query: str, lang: str, hits: list[Hit], sentence: str, floor: float
) -> GateFeatures:
    """Compute the gate's signals; ``hits`` is non-empty, best first."""
    top = hits[0]
    same_group = sum(h.passage.query_id == top.passage.query_id for h in hits) / len(hits)
    return GateFeatures(
        top_score=top.score,
        over_floor=top.score - floor,
        sentence_coverage=coverage(set(content_tokens(query, lang)), sentence),
        group_agreement=same_group,
    )


@dataclass(frozen=True, slots=True)
class GateVerdict:
    is_answerable: bool
    probability: float
    threshold: float
    features: GateFeatures

    @property
    def detail(self) -> str:
        op = ">=" if self.is_answerable else "<"
        verdict = f"p {self.probability:.3f} {op} threshold {self.threshold:.3f}"
        return f"{verdict}; {self.features.describe()}"


@dataclass(frozen=True, slots=True)
class AnswerabilityGate:
    """Logistic model: p = sigmoid(w · (x − mean) / scale + b), per language where fitted
    (``models[lang]``), else the pooled model (``models["all"]``)."""

    models: dict[str, dict]

    @classmethod
    def load(cls, path: Path = MODEL_PATH) -> AnswerabilityGate:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if tuple(data["features"]) != FEATURES:
            raise ValueError(f"{path}: features {data['features']} != {FEATURES}; refit the gate")
        return cls(data["models"])

    def decide(self, features: GateFeatures, lang: str) -> GateVerdict:
        m = self.models.get(lang) or self.models["all"]
        z = (features.vector() - np.asarray(m["mean"])) / np.asarray(m["scale"])
        logit = float(z @ np.asarray(m["coef"]) + m["intercept"])
        probability = 1.0 / (1.0 + math.exp(-logit))
        return GateVerdict(probability >= m["threshold"], probability, m["threshold"], features)
