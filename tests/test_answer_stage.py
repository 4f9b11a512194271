"""The answer decision in one home (issue 41): the product decides one question at a time
(``GateModels.verdict``, through ``AnswerStage``), ``scripts/fit_answering.py`` decides thousands
at once (``GateModels.decisions``); both must give the same verdict on the same signals, and the
gate file the fit writes must decide as the fit did."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rag.answer import (
    FEATURES,
    READER_OF,
    GateFeatures,
    GateModels,
    LogisticModel,
    ReaderScores,
)
from rag.answer.gate import probabilities, screen_is_sure, verdict_kinds
from rag.answer.readers import reader_groups
from rag.answer.signals import READER_SIGNALS

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def draws(gate: GateModels, n: int, seed: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``n`` rows of signals per language of ``gate`` drawn around its models' means (two
    scales wide, so every verdict occurs; the answer's cosine and the reader's signals half a
    scale, so a reader model's bounds over them are tight enough to refuse some unread), with
    reader signals for every row (the languages without a reader model ignore them):
    ``(langs, x, reader_x)``."""
    rng = np.random.default_rng(seed)
    langs, xs, rxs = [], [], []
    for lang in ("en", "hi", "gu", "te"):
        model = gate.gate_model(lang)
        x = model.mean + 2 * model.scale * rng.standard_normal((n, len(FEATURES)))
        x[:, -1] = model.mean[-1] + 0.5 * model.scale[-1] * rng.standard_normal(n)
        xs.append(x)
        reader = gate.reader_models.get(lang, model)
        rxs.append(reader.mean[-4:] + 0.5 * reader.scale[-4:]
                   * rng.standard_normal((n, len(READER_SIGNALS))))
        langs += [lang] * n
    return langs, np.vstack(xs), np.vstack(rxs)


def bounded(gate: GateModels, x: np.ndarray, rx: np.ndarray) -> GateModels:
    """``gate`` with each reader model bounded by the range of the drawn rows' later signals
    (answer_cosine and the reader's), so some rows are refused unread."""
    later = np.hstack([x[:, -1:], rx])
    bounds = tuple(zip(later.min(axis=0).tolist(), later.max(axis=0).tolist(), strict=True))
    return replace(gate, reader_models={lang: replace(m, bounds=bounds)
                                        for lang, m in gate.reader_models.items()})


def one_by_one(gate: GateModels, lang: str, x: np.ndarray, rx: np.ndarray):
    """The product's path for one question (``AnswerStage``): where a reader reads the
    language, the reader model's ceiling first (refused unread), then the reading; elsewhere
    the screen first on the signals without the answer's cosine, then with it."""
    features = GateFeatures(**dict(zip(FEATURES, map(float, x), strict=True)))
    unembedded = replace(features, answer_cosine=None)
    if gate.reads(lang):
        unread = gate.verdict(unembedded, lang, can_read=True)
        return unread or gate.verdict(features, lang, ReaderScores((), *map(float, rx)),
                                      can_read=True)
    return gate.verdict(unembedded, lang) or gate.verdict(features, lang)


def test_the_products_verdict_is_the_fits_on_every_row_to_the_bit():
    """Every row of 4 x 600 drawn around the shipped models (their reader models bounded):
    the product's one-row verdict and the fit's many-row decision agree on the probability
    (bit for bit), the kind (confident, hedged, refused), which model decided (screen, reader,
    full gate, or refused unread) and its thresholds."""
    shipped = GateModels.load()
    langs, x, rx = draws(shipped, 600, seed=41)
    gate = bounded(shipped, x, rx)
    many = gate.decisions(langs, x, rx)
    kinds = {"confident": 0, "hedged": 0, "refused": 0}
    for k, lang in enumerate(langs):
        one = one_by_one(gate, lang, x[k], rx[k])
        assert one.probability == many.p[k], (k, lang)
        assert (one.is_answerable, one.is_hedged, one.screened, one.is_unread) == (
            many.confident[k], many.hedged[k], many.screened[k], many.skipped[k]), (k, lang)
        assert (one.reading is not None) == many.read[k]
        assert one.threshold == many.threshold[k]
        kinds["confident" if one.is_answerable else "hedged" if one.is_hedged else "refused"] += 1
    assert all(n > 50 for n in kinds.values()), kinds  # every verdict was exercised
    assert 0 < many.read.sum() and 0 < many.skipped.sum()
    if set(gate.reader_models) != {"en", "hi", "gu", "te"}:
        assert 0 < many.screened.sum()


def test_a_question_refused_unread_would_be_refused_read():
    """The ceiling is a bound: every row refused unread gets, read, a probability at most its
    ceiling, under the hedge threshold."""
    shipped = GateModels.load()
    langs, x, rx = draws(shipped, 600, seed=5)
    gate = bounded(shipped, x, rx)
    unread = gate.decisions(langs, x, rx)
    assert unread.skipped.any()
    for lang, m in gate.reader_models.items():
        rows = (np.asarray(langs) == lang) & unread.skipped
        read_p = m.probability(np.hstack([x[rows], rx[rows]]))
        assert (read_p <= unread.p[rows]).all() and (read_p < m.hedge).all()


def test_the_screen_leaves_a_row_to_the_full_gate_until_the_answer_is_embedded():
    gate = GateModels.load()
    langs, x, _ = draws(gate, 300, seed=7)
    unembedded = x.copy()
    unembedded[:, -1] = np.nan
    first = gate.decisions(langs, unembedded, read_langs=())
    second = gate.decisions(langs, x, read_langs=())
    assert first.needs_cosine.any() and (first.needs_cosine == ~first.screened).all()
    # rows the screen decided are decided alike with or without the answer's cosine
    sure = first.screened
    assert (first.p[sure] == second.p[sure]).all()
    assert not (first.confident | first.hedged)[first.needs_cosine].any()
    reading = gate.decisions(langs, unembedded)  # the reader models want their reader first,
    # except where their ceiling refuses unread
    assert (reading.needs_reading
            == np.isin(langs, list(gate.reader_models)) & ~reading.skipped).all()


def test_the_rules_over_arrays():
    p = np.array([0.9, 0.7, 0.5, 0.4, np.nan])
    confident, hedged = verdict_kinds(p, 0.7, 0.45)
    assert confident.tolist() == [True, True, False, False, False]
    assert hedged.tolist() == [False, False, True, False, False]
    assert screen_is_sure(p, 0.7, 0.45, 0.2).tolist() == [True, False, False, False, False]
    # a hedge threshold equal to the confident one hedges nothing
    assert not verdict_kinds(p, 0.7, 0.7)[1].any()


def test_one_row_or_thousands_the_probability_is_the_same_to_the_bit():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3000, 15))
    mean, scale, coef = rng.standard_normal(15), rng.random(15) + 0.5, rng.standard_normal(15)
    many = probabilities(x, mean, scale, coef, 0.3)
    assert all(probabilities(row, mean, scale, coef, 0.3)[0] == many[k]
               for k, row in enumerate(x))


def test_a_gate_file_round_trips_and_is_validated(tmp_path):
    gate = GateModels.load()
    path = tmp_path / "gate_model.json"
    gate.write(path)
    assert json.loads(path.read_text()) == gate.to_json()
    assert GateModels.load(path).to_json() == gate.to_json()
    broken = gate.to_json()
    broken["reader_models"]["en"]["scale"] = [1.0]
    path.write_text(json.dumps(broken))
    with pytest.raises(Exception, match=r"reader_models\['en'\]\['scale'\] is not a list.*"
                                        r"rerun python3 scripts/fit_answering.py"):
        GateModels.load(path)


def fit_rows(seed: int = 3, n: int = 900):
    """Synthetic gate rows shaped as the fit's (``fit_answering.GateRows``): en and hi natural
    questions, near-misses and off-corpus ones, signals that tell right from wrong a little,
    reader signals for every question."""
    import fit_answering as fit

    rng = np.random.default_rng(seed)
    langs = np.array(["en", "hi"] * (n // 2))
    kinds = rng.choice(["answerable", "answerable", "near_miss", "off_corpus"], n)
    label = np.where(kinds == "answerable", rng.random(n) < 0.7, 0).astype(int)
    x = rng.standard_normal((n, len(FEATURES))) + label[:, None] * 0.8
    reader_x = rng.standard_normal((n, len(READER_SIGNALS))) + label[:, None] * 1.5
    rows = fit.GateRows(np.arange(n), x, reader_x, x, label, kinds, langs,
                        np.arange(n) // 3, np.arange(n) % 5)
    totals = {s: (int(((kinds == "answerable") & np.isin(langs, ls)).sum()),
                  int(((kinds == "near_miss") & np.isin(langs, ls)).sum()))
              for s, ls in (("all", ("en", "hi")), ("en", ("en",)), ("hi", ("hi",)),
                            ("gu", ("gu",)), ("te", ("te",)))}
    offs = {s: int(((kinds == "off_corpus") & np.isin(langs, ls)).sum())
            for s, ls in (("all", ("en", "hi")), ("en", ("en",)), ("hi", ("hi",)),
                          ("gu", ("gu",)), ("te", ("te",)))}
    return fit, rows, totals, offs


def test_the_gate_file_the_fit_writes_decides_as_the_fit_did(tmp_path):
    """``fit_answering.fit_gate`` (one function for each fold and the shipped file) → the file
    (``GateModels.write``) → what the product loads: the same decisions on every row, and the
    fit's own out-of-fold loop decides through the same ``GateModels.decisions``."""
    fit, rows, totals, offs = fit_rows()
    picks = {kind: [1.0, 0.5] for kind in reader_groups(READER_OF)}
    gate, chosen = fit.fit_gate(rows, rows.label >= 0, 4, None, 0.2, totals, offs, picks, 4)
    assert set(gate.reader_models) == {"en", "hi"} and gate.pick_weights("hi") == (1.0, 0.5)
    assert {"en", "hi", "en read", "hi read"} <= set(chosen)
    path = tmp_path / "gate_model.json"
    gate.write(path)
    shipped = GateModels.load(path)
    want = gate.decisions(rows.langs, rows.x, rows.reader_x)
    got = shipped.decisions(rows.langs, rows.x, rows.reader_x)
    for field in ("p", "threshold", "hedge_threshold", "confident", "hedged", "read"):
        assert (getattr(got, field) == getattr(want, field)).all(), field
    for k in range(0, len(rows.langs), 37):
        one = one_by_one(shipped, rows.langs[k], rows.x[k], rows.reader_x[k])
        assert (one.probability, one.is_answerable, one.is_hedged) == (
            want.p[k], want.confident[k], want.hedged[k])


def test_a_logistic_model_records_its_fit():
    model = LogisticModel(np.zeros(2), np.ones(2), np.array([1.0, -1.0]), 0.0, 0.6, 0.4, 0.8,
                          (1.0, 2.0))
    data = model.to_json()
    assert list(data) == ["mean", "scale", "coef", "intercept", "threshold", "hedge_threshold",
                          "target", "pick"]
    assert LogisticModel.from_json(data, "m", 2).to_json() == data
    with pytest.raises(ValueError, match="hedge_threshold"):
        LogisticModel.from_json({**data, "hedge_threshold": 0.9}, "m", 2)
