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
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from rag.text import content_tokens, coverage
from rag.types import Hit

MODEL_PATH = Path(__file__).with_name("gate_model.json")

# Queries that ask for a quantity (MS MARCO query_type NUMERIC), per language.
_NUMERIC_QUERY = re.compile(
    r"\b(how\s+(much|many|long|old|far|tall|big|large|heavy|fast|often|hot|cold|deep|high)"
    r"|cost|price|salary|calories|temperature|percentage|number\s+of|average)\b"
    r"|कितन|कीमत|लागत|मात्रा|संख्या|तापमान|वेतन|औसत"
    r"|કેટલ|કિંમત|કિમત|ખર્ચ|તાપમાન|પગાર|સરેરાશ"
    r"|ఎంత|ఎన్ని|ధర|ఖర్చు|ఉష్ణోగ్రత|జీతం|సగటు",
    re.IGNORECASE,
)
_DIGIT = re.compile(r"\d|[०-९૦-૯౦-౯]")
_NUMBER_WORDS = re.compile(
    r"\b(one|two|three|four|five|six|seven|eight|nine|ten|hundred|thousand|million|billion|"
    r"dozen|half)\b",
    re.IGNORECASE,
)

FEATURES = ("top_score", "over_floor", "margin", "sentence_coverage", "passage_coverage",
            "number_mismatch", "group_agreement", "sibling_score", "n_query_tokens")


@dataclass(frozen=True, slots=True)
class GateFeatures:
    """Signals of one (query, hits, best sentence). Scores are cosines; coverages are shares of
    the query's content tokens (0–1); ``number_mismatch`` is 1 when the query asks for a
    quantity and the best sentence holds no number; ``group_agreement`` is the share of hits from
    the top hit's MS MARCO query group; ``sibling_score`` is the cosine of the top passage's
    parallel translation (the top score itself when there is none)."""

    top_score: float
    over_floor: float
    margin: float
    sentence_coverage: float
    passage_coverage: float
    number_mismatch: float
    group_agreement: float
    sibling_score: float
    n_query_tokens: float

    def vector(self) -> np.ndarray:
        return np.array([getattr(self, name) for name in FEATURES], dtype=np.float64)

    def describe(self) -> str:
        return ", ".join(f"{k} {v:.3f}" for k, v in asdict(self).items())


def asks_for_number(query: str) -> bool:
    return bool(_NUMERIC_QUERY.search(query))


def has_number(text: str) -> bool:
    return bool(_DIGIT.search(text) or _NUMBER_WORDS.search(text))


def gate_features(
    query: str, lang: str, hits: list[Hit], sentence: str, floor: float, sibling_score: float | None
) -> GateFeatures:
    """Compute the gate's signals; ``hits`` is non-empty, best first."""
    top = hits[0]
    query_tokens = set(content_tokens(query, lang))
    others = [h.score for h in hits[1:]]
    same_group = sum(h.passage.query_id == top.passage.query_id for h in hits) / len(hits)
    return GateFeatures(
        top_score=top.score,
        over_floor=top.score - floor,
        margin=top.score - (max(others) if others else 0.0),
        sentence_coverage=coverage(query_tokens, sentence),
        passage_coverage=coverage(query_tokens, top.passage.text),
        number_mismatch=float(asks_for_number(query) and not has_number(sentence)),
        group_agreement=same_group,
        sibling_score=top.score if sibling_score is None else sibling_score,
        n_query_tokens=float(len(query_tokens)),
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
        return f"p {self.probability:.3f} {op} threshold {self.threshold:.3f}; {self.features.describe()}"


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
