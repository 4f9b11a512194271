"""Fit answer selection and the answerability gate, and report both out of fold.

    python scripts/fit_answering.py                  # report, write rag/selector_model.json and
                                                     # rag/gate_model.json, plots in docs/img/
    python scripts/fit_answering.py --dry-run        # report only

Data (all real): the project's training questions (``eval/training/*.jsonl``, issue 22: answerable
questions with a verbatim answer span, and near-misses whose fact no passage of the topic states,
typed, spoken, code-mixed and in Latin letters), the shared sample's dataset queries (answerable,
"No Answer Present", a sample of those whose passages are not in the sample) and its off-corpus
questions (``scripts/evaluate.py`` ``load_cases``). The test set (``eval/natural_questions.jsonl``,
``eval/test_as_spoken.jsonl``) is never read here: ``scripts/test_report.py`` reports the
shipped pipeline on it. Retrieval is the production one (hybrid where ``rag/fusion.json`` says).

1. **Selection** (rag/selection.py): every sentence of the top-k hits is a candidate, positive when
   it contains the answer span; a logistic model over the candidate features, fitted on the
   natural answerable questions.
2. **Gate** (rag/gate.py): a logistic model over the question's top cosine and its selected
   answer (including the cosine between the question and the answer text's own vector) and how
   the question was put (``question_style``: English words inside, Hindi in Latin letters,
   fillers), and a screen, the same over the signals that need no encoder call, which decides
   alone where it is ``SCREEN_BAND`` or more from its threshold; positives are natural
   questions whose selected answer contains the span and dataset answerable queries, negatives
   near-misses, off-corpus and not-in-corpus questions and natural questions whose selected
   answer misses the span (a wrong answer is worse than a refusal).
   "No Answer Present" queries are reported, not trained on (MS MARCO's own labels disagree with
   annotators at that level).

Out of fold: every case gets a fold from GroupKFold over query_id (translations and the natural
questions of one topic share it; off-corpus questions are their own groups). A case's selection
comes from a selector fitted on the other folds, its gate decision from a gate fitted on the other
folds' (out-of-fold) features, with each language's operating point (:func:`choose_target`:
the target and its threshold) chosen inside those folds by a second, inner GroupKFold (nested: no
reported number is used to pick its own threshold). One leak remains, the usual one of stacking:
the other folds' gate features come from selectors that saw this fold's answer spans. The
shipped models are then refitted on everything, the operating point chosen the same way on all
out-of-fold scores (``--target`` fixes one target for every language instead, as ``--curve``
does).
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupKFold
from sklearn.preprocessing import StandardScaler

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from evaluate import load_cases  # noqa: E402

from rag import gate as gate_module  # noqa: E402
from rag import selection as selection_module  # noqa: E402
from rag.encoders import load_encoder  # noqa: E402
from rag.gate import FEATURES as GATE_FEATURES  # noqa: E402
from rag.gate import (  # noqa: E402
    READER_FEATURES,
    SCREEN_FEATURES,
    AnswerabilityGate,
    gate_features,
    question_style,
)
from rag.index import PassageIndex  # noqa: E402
from rag.pipeline import Pipeline, Prepared  # noqa: E402
from rag.retrieval import load_fusion  # noqa: E402
from rag.selection import FEATURES as SELECTION_FEATURES  # noqa: E402
from rag.selection import (  # noqa: E402
    AnswerSelector,
    Candidate,
    Selection,
    candidate_features,
)
from rag.settings import SHARED_SAMPLE, RagSettings  # noqa: E402
from rag.types import LANGUAGES, Trace  # noqa: E402

TRAINING = sorted((ROOT / "eval" / "training").glob("*.jsonl"))
TARGETS = tuple(round(0.50 + 0.05 * k, 2) for k in range(9))
"""Shares of right natural answers the gate may keep (0.50-0.90): the grid :func:`choose_target`
picks each language's operating point from."""
READER_TARGETS = (*TARGETS, 0.95)
"""The grid for the English reader's model (issue 31): its signals separate right answers from
near-misses well enough that 0.95 may stay within the bounds."""
WRONG_BOUND = {"en": 0.04, "hi": 0.05, "gu": 0.08, "te": 0.08}
"""Acceptance bound on natural answerable questions answered wrongly (confidently), per
language: en issue 31's (was issue 22's 0.05), the others issue 22's."""
NEAR_MISS_BOUND = {"en": 0.08, "hi": 0.12}
"""Bound on near-misses answered confidently: en issue 31's (was 0.12), hi issue 22's (none is
stated for gu and te)."""
HEDGE_PRECISION = 0.5
"""Issue 31's rule for hedged answers: among the labelled questions the hedged band [hedge
threshold, confident threshold) answers (natural answerable questions and near-misses, and the
dataset's not-in-corpus queries, counted as not holding the fact), at least this share hold the
fact (a hedged answer "more likely right than wrong"); also among the ``HEDGE_EDGE`` lowest of
them (the band's lower edge)."""
HEDGE_EDGE = 20
MIN_HEDGE_BAND = 10
"""Fewest questions of :data:`HEDGE_COUNTED` kinds a hedged band must hold for its share to
count."""
HEDGE_COUNTED = ("answerable", "near_miss", "not_in_corpus")
"""The kinds whose questions a hedged band's share is counted over (:data:`HEDGE_PRECISION`)."""
OFF_CORPUS_BOUND = 0.01
"""Most off-corpus questions (``offcorpus.jsonl``: nothing in the corpus is about them) a hedge
threshold may let through, as a share of the scope's (issue 31: never an answer to an
off-corpus question; the acceptance bound on the test set is 0.02). The dataset's not-in-corpus
queries are not held to it: their own passages are missing from the sample, but the sample often
answers them (hi, out of fold: 4 of 150 answered confidently, as "causes of lung inflammation"
with a passage that states them), so they count against the band's share instead
(:data:`HEDGE_COUNTED`); held to this bound too, they stopped the scan at the confident threshold
itself in Hindi (nothing hedged) and cut English's band short (this round's training
questions, out of fold: docs/benchmarks.md)."""
READER_GROUPS = {"en": ("en",), "student": ("hi", "gu", "te")}
"""Languages gated by a reader's model, one model per reader: the English reader
(rag/reader.py) for English, the multilingual student (rag/student_reader.py, issue 32) for
hi, gu and te."""
READER_SCOPES = tuple(lang for langs in READER_GROUPS.values() for lang in langs)
READER_SPAN_SHARE = 0.95
"""Issue 31: the reader reads the selector's top k candidates, k the smallest whose top k holds
the answer span for at least this share of the training questions (English, those whose
candidates hold it at all); written to the gate file as ``reader_top_k``."""


def choose_target(p: np.ndarray, y: np.ndarray, kinds: np.ndarray, lang: str, n_answerable: int,
                  n_near_miss: int, targets: tuple[float, ...] = TARGETS) -> tuple[float, float]:
    """A language's operating point, (target, threshold), from out-of-fold probabilities ``p``
    of its cases that reached the gate (``y`` their labels, ``kinds`` their kinds).

    The rule (a wrong answer is the worst failure; a refusal that says why is a correct outcome):
    for each target of :data:`TARGETS` the threshold is :func:`pick_threshold`'s, and its shares
    are counted over the language's ``n_answerable`` natural answerable questions and
    ``n_near_miss`` near-misses (those the floor refused included): right answers, wrong answers,
    near-misses answered. Among the targets whose wrong share is at most
    :data:`WRONG_BOUND` and near-miss share at most :data:`NEAR_MISS_BOUND` (where the language
    has one), the one with the most right answers (a tie: the higher target); when no target is
    within the bounds, the one that exceeds them least (the sum of the excesses over the two
    bounds, in shares), then the most right answers, then the higher target. The pooled scope
    (``all``) uses the strictest bounds (en's)."""
    wrong_bound = WRONG_BOUND.get(lang, min(WRONG_BOUND.values()))
    near_bound = NEAR_MISS_BOUND.get(lang, min(NEAR_MISS_BOUND.values()) if lang == "all" else None)
    best: tuple | None = None
    for target in targets:
        t = pick_threshold(p, y, kinds, target)
        answered = p >= t
        right = (answered & (kinds == "answerable") & (y == 1)).sum() / max(n_answerable, 1)
        wrong = (answered & (kinds == "answerable") & (y == 0)).sum() / max(n_answerable, 1)
        near = (answered & (kinds == "near_miss")).sum() / max(n_near_miss, 1)
        excess = max(0.0, wrong - wrong_bound)
        if near_bound is not None:
            excess += max(0.0, near - near_bound)
        key = (excess, -right, -target)
        if best is None or key < best[0]:
            best = (key, target, t)
    return best[1], best[2]


def choose_hedge(p: np.ndarray, y: np.ndarray, kinds: np.ndarray, threshold: float,
                 n_off: int) -> float:
    """The hedge threshold under the confident ``threshold``, from out-of-fold probabilities
    ``p`` of a scope's cases that reached the gate (``y`` labels, ``kinds`` kinds): the lowest
    probability ``t`` such that the questions of :data:`HEDGE_COUNTED` kinds in
    [t, threshold) number at least :data:`MIN_HEDGE_BAND` and at least :data:`HEDGE_PRECISION`
    of them hold the fact (so do the :data:`HEDGE_EDGE` lowest of them), scanning down from
    ``threshold`` and stopping where more than :data:`OFF_CORPUS_BOUND` of the scope's
    ``n_off`` off-corpus questions (those the floor refused included) would be answered.
    ``threshold`` itself (nothing hedged) when no ``t`` qualifies."""
    counted = np.isin(kinds, HEDGE_COUNTED)
    off = kinds == "off_corpus"
    chosen = threshold
    for t in np.unique(p[p < threshold])[::-1]:
        if n_off and off[p >= t].sum() > OFF_CORPUS_BOUND * n_off:
            break
        band = counted & (p >= t) & (p < threshold)
        if band.sum() < MIN_HEDGE_BAND:
            continue
        edge = y[band][np.argsort(p[band], kind="stable")[:HEDGE_EDGE]]
        if y[band].mean() >= HEDGE_PRECISION and edge.mean() >= HEDGE_PRECISION:
            chosen = float(t)
    return chosen


@dataclass
class Item:
    """One question and what retrieval gave it. ``kind`` is answerable/near_miss (natural) or a
    dataset category (answerable is then ``dataset_answerable``); ``candidates`` is empty when the
    floor refused it."""

    text: str
    lang: str
    kind: str
    group: int
    answer: str = ""
    style: str = ""
    """How a natural question is put (typed, spoken, code_mixed, latin); "" for the others."""
    prepared: Prepared | None = None
    candidates: list[Candidate] = field(default_factory=list)
    labels: np.ndarray | None = None
    fold: int = -1


def collect(
    pipeline: Pipeline, natural: list[dict], cases: list, cache: Path | None = None
) -> list[Item]:
    """Retrieve every question once (floors applied, no gate) and build its candidates.

    ``cache``: a pickle of the retrieval results by question text (read when present, written
    when it was missing or lacked a question), so refitting after a change to the features skips
    the query embeddings; it must come from the same index and encoder."""
    retrieved: dict = {}
    if cache is not None and cache.is_file():
        retrieved = pickle.loads(cache.read_bytes())
    items: list[Item] = []
    for row in natural:
        items.append(Item(row["question"], row["lang"], row["kind"], row["query_id"],
                          row.get("answer", ""), row.get("style", "")))
    for i, case in enumerate(cases):
        kind = "dataset_answerable" if case.category == "answerable" else case.category
        group = case.query_id if case.query_id is not None else -1 - i
        items.append(Item(case.text, case.lang, kind, group))
    n_cached = len(retrieved)
    for item in items:
        if item.text not in retrieved:
            retrieved[item.text] = pipeline.prepare(item.text, None, None, Trace())
        prepared = retrieved[item.text]
        if not isinstance(prepared, Prepared):
            continue
        prepared.selection = None  # retrieval only: candidates are rebuilt below
        item.prepared = prepared
        lang = prepared.lang

        def in_language(hit, lang=lang):
            return pipeline.in_language(hit, lang)

        item.candidates = candidate_features(
            prepared.query, lang, prepared.hits, in_language, pipeline.idf
        )
        if item.answer:
            item.labels = np.array([item.answer in c.text for c in item.candidates], dtype=int)
    if cache is not None and len(retrieved) > n_cached:
        cache.write_bytes(pickle.dumps(retrieved))
    return items


def _fit(x: np.ndarray, y: np.ndarray, c: float = 1.0) -> tuple[StandardScaler, LogisticRegression]:
    scaler = StandardScaler().fit(x)
    scaler.scale_[scaler.scale_ == 0] = 1.0
    model = LogisticRegression(C=c, class_weight="balanced", max_iter=2000)
    return scaler, model.fit(scaler.transform(x), y)


def fit_selector(items: list[Item]) -> AnswerSelector:
    """Selector over the candidates of natural answerable questions with a positive candidate."""
    rows = [it for it in items if it.labels is not None and it.labels.any()]
    x = np.concatenate([np.stack([c.features.vector() for c in it.candidates]) for it in rows])
    y = np.concatenate([it.labels for it in rows])
    scaler, model = _fit(x, y)
    return AnswerSelector(scaler.mean_, scaler.scale_, model.coef_[0], float(model.intercept_[0]))


def gate_label(item: Item, selection: Selection | None) -> int | None:
    """1 answer, 0 refuse, None not trained on ("No Answer Present")."""
    if item.kind == "answerable":
        return int(selection is not None and item.answer in selection.text)
    if item.kind == "dataset_answerable":
        return 1
    if item.kind == "no_answer_present":
        return None
    return 0


def pick_threshold(p: np.ndarray, y: np.ndarray, kinds: np.ndarray, target: float) -> float:
    """Highest threshold answering at least ``target`` of the natural questions whose selected
    answer is right (falls back to all positives when there are none)."""
    pos = np.sort(p[(y == 1) & (kinds == "answerable")])
    if not len(pos):
        pos = np.sort(p[y == 1])
    k = int(np.floor((1 - target) * len(pos)))
    return float(pos[k]) if len(pos) else 0.5


SCREEN_BAND = 0.2
"""How far (in probability) the screen must be from its threshold to decide without embedding
the answer (rag/gate.py). Out of fold (5 folds, 1,160 cases that reach the gate) ``main`` prints
how often the screen decides alone and how many decisions differ from the full gate's
(``--screen-band``): 0.1 alone for 84.5 % and 6 decisions differ (en near-misses answered 21.3 →
23.0 %), 0.2 for 61.6 % and 1, 0.3 for 32.6 % and none. 0.2 was chosen on these figures (a
speed knob: the correctness figures reported are those of the screened gate), in the previous
round, on the natural questions that are now the test set; on this round's training questions
the screen decides alone for 45.7 % of 4,496 cases and 19 decisions differ from the full
gate's."""

THRESHOLD_SCOPES = {"en": ("en",), "hi": ("hi",), "gu": ("gu",), "te": ("te",)}
"""Which languages' questions pick each language's threshold: each its own (the training set has
250+ answerable questions per language; their scores sit apart, gu/te lower since a tenth of the
passages are in their languages, so a pooled threshold would refuse most of them)."""
MIN_RIGHT_FOR_THRESHOLD = 15


def gate_threshold(x, y, kinds, groups, langs, folds: int, targets: dict[str, float] | None = None,
                   totals: dict[str, tuple[int, int]] | None = None,
                   scopes: dict[str, tuple[str, ...]] | None = None,
                   grid: tuple[float, ...] = TARGETS,
                   off_totals: dict[str, int] | None = None,
                   ) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """Per-scope confident thresholds (``scopes``, default :data:`THRESHOLD_SCOPES` and a
    pooled ``all`` for a scope with fewer than ``MIN_RIGHT_FOR_THRESHOLD`` right natural
    answers), each picked on inner out-of-fold probabilities of ``x``'s rows, with the targets
    they keep and the hedge thresholds under them: ``targets[scope]`` where given, else
    :func:`choose_target`'s over ``grid``, which needs ``totals[scope]`` = (natural answerable,
    near-miss) questions of the scope among the training cases, those the floor refused
    included; hedges by :func:`choose_hedge` with ``off_totals[scope]`` (none: nothing
    hedged)."""
    p = np.zeros(len(y))
    for train, test in GroupKFold(n_splits=folds).split(x, y, groups):
        if len(set(y[train])) < 2:  # a tiny scope: one class only, nothing to fit
            p[test] = float(y[train][0])
            continue
        scaler, model = _fit(x[train], y[train])
        p[test] = model.predict_proba(scaler.transform(x[test]))[:, 1]
    masks = {} if scopes is not None else {"all": np.ones(len(y), bool)}
    for lang, scope in (scopes or THRESHOLD_SCOPES).items():
        mask = np.isin(langs, scope)
        if ((y == 1) & mask & (kinds == "answerable")).sum() >= MIN_RIGHT_FOR_THRESHOLD:
            masks[lang] = mask
    thresholds, chosen, hedges = {}, {}, {}
    for scope, mask in masks.items():
        if targets is not None:
            chosen[scope] = targets[scope]
            thresholds[scope] = pick_threshold(p[mask], y[mask], kinds[mask], targets[scope])
        else:
            chosen[scope], thresholds[scope] = choose_target(p[mask], y[mask], kinds[mask], scope,
                                                             *totals[scope], targets=grid)
        hedges[scope] = thresholds[scope] if off_totals is None else choose_hedge(
            p[mask], y[mask], kinds[mask], thresholds[scope], off_totals[scope])
    return thresholds, chosen, hedges


def natural_totals(items: list[Item], keep: Callable[[Item], bool] = lambda it: True
                   ) -> dict[str, tuple[int, int]]:
    """(natural answerable, near-miss) questions per threshold scope and pooled (``all``) among
    the ``items`` that ``keep`` accepts, the floor's refusals included."""
    out = {}
    for scope, langs in (("all", LANGUAGES), *THRESHOLD_SCOPES.items()):
        kept = [it for it in items if keep(it) and it.lang in langs]
        out[scope] = (sum(it.kind == "answerable" for it in kept),
                      sum(it.kind == "near_miss" for it in kept))
    return out


def off_totals_of(items: list[Item], keep: Callable[[Item], bool] = lambda it: True
                  ) -> dict[str, int]:
    """Off-corpus questions per scope (as :func:`natural_totals`)."""
    return {scope: sum(keep(it) and it.lang in langs and it.kind == "off_corpus" for it in items)
            for scope, langs in (("all", LANGUAGES), *THRESHOLD_SCOPES.items())}


def assign_folds(items: list[Item], folds: int) -> np.ndarray:
    """Set each item's ``fold`` (GroupKFold by ``group``: query_id) and return them, int (n,)."""
    groups = np.array([it.group for it in items])
    fold_of = np.zeros(len(items), int)
    for f, (_, test) in enumerate(GroupKFold(n_splits=folds).split(groups, groups, groups)):
        fold_of[test] = f
    for it, f in zip(items, fold_of, strict=True):
        it.fold = int(f)
    return fold_of


AnswerCosine = Callable[[Item, Selection | None], float]
"""The gate's ``answer_cosine`` for an item and one of its selections."""


def answer_cosines(pipeline: Pipeline) -> AnswerCosine:
    """``Pipeline.answer_cosine`` with each answer text embedded once (a selection repeats across
    folds and ``--curve`` targets)."""
    vectors: dict[str, np.ndarray] = {}

    def cosine(item: Item, selection: Selection | None) -> float:
        if selection is None:
            return 0.0
        if selection.text not in vectors:
            vectors[selection.text] = pipeline.encode_passages([selection.text])[0]
        return float(vectors[selection.text] @ item.prepared.vector)

    return cosine


ReadFn = Callable[[str, list[str], str], list[float]]
"""A reader's logits of (question, candidate text) pairs in a language (:func:`reader_scores`)."""


def reader_scores(cache_path: Path | None) -> tuple[ReadFn, Callable[[], None]]:
    """The readers (rag/reader.py for English, rag/student_reader.py for hi/gu/te) with every
    pair they score kept in a pickle at ``cache_path`` (read when present), by reader:
    ``(read, save)``, ``read(question, texts, lang)``."""
    from rag.model_files import sha256_of
    from rag.reader import load_reader
    from rag.student_reader import HEAD_FILE, StudentReader, default_student_dir

    readers = {"en": load_reader(), "student": StudentReader()}
    student_tag = "student:" + sha256_of(default_student_dir() / HEAD_FILE)[:16]
    cache: dict = {}
    if cache_path is not None and cache_path.is_file():
        cache = pickle.loads(cache_path.read_bytes())
    n_cached = len(cache)

    def read(question: str, texts: list[str], lang: str = "en") -> list[float]:
        name = "en" if lang == "en" else "student"
        tag = name if name == "en" else student_tag
        todo = [t for t in dict.fromkeys(texts) if (tag, question, t) not in cache]
        if todo:
            for t, score in zip(todo, readers[name].score(question, todo), strict=True):
                cache[(tag, question, t)] = float(score)
        return [cache[(tag, question, t)] for t in texts]

    def save() -> None:
        if cache_path is not None and len(cache) > n_cached:
            cache_path.write_bytes(pickle.dumps(cache))

    return read, save


def span_at_k(items: list[Item], decided: dict[int, dict], lang: str = "en",
              ks: tuple[int, ...] = tuple(range(1, 11))) -> dict[int, float]:
    """Share of ``lang``'s natural answerable questions whose out-of-fold ranked candidates
    hold the answer span somewhere, that hold it among the top k, for each k of ``ks``."""
    ranks = []
    for i, it in enumerate(items):
        d = decided.get(i)
        if it.lang != lang or it.kind != "answerable" or not d or d["selection"] is None:
            continue
        hits = [k for k, c in enumerate(d["selection"].ranked) if it.answer in c.text]
        if hits:
            ranks.append(hits[0])
    return {k: float(np.mean([r < k for r in ranks])) if ranks else 0.0 for k in ks}


def fit_pick(rows: list[tuple[Item, dict]]) -> list[float]:
    """The pick weights (rag/reader.py :data:`PICK_SIGNALS`: the selector's logit, the reader's
    logit): a logistic model over the candidates read of ``rows`` (a natural answerable question
    and its out-of-fold ``selection`` and ``reader_scores``), positive where the candidate holds
    the answer span; the intercept is dropped (it does not change the order)."""
    x, y = [], []
    for it, d in rows:
        if it.kind != "answerable" or not d["reader_scores"]:
            continue
        for c, score in zip(d["selection"].ranked, d["reader_scores"], strict=False):
            p = min(max(c.probability, 1e-6), 1 - 1e-6)
            x.append((np.log(p / (1 - p)), score))
            y.append(int(it.answer in c.text))
    model = LogisticRegression(max_iter=2000).fit(np.array(x), np.array(y))
    return [float(w) for w in model.coef_[0]]


def repick(item: Item, d: dict, weights: list[float], selector: AnswerSelector,
           cosine: AnswerCosine) -> None:
    """Re-pick ``item``'s answer as the pipeline does (``AnswerSelector.repick``) by ``weights`` and
    update its decision entry ``d`` (selection, reader scores in the new order, gate signals,
    label, reader signals; ``moved``: the selector's rank of the new pick; ``read``: the
    candidates read and their scores in the selector's order, for :func:`reader_report`)."""
    from rag.reader import reader_signals

    sel, scores = d["selection"], d["reader_scores"]
    d.setdefault("read", (sel.ranked[:len(scores)], list(scores)) if scores else ((), []))
    moved = 0
    if scores:
        picked, scores, moved = selector.repick(item.text, sel, scores, weights)
        if picked is not sel:
            d.update(selection=picked, reader_scores=scores, label=gate_label(item, picked),
                     gate_x=gate_features(item.prepared.hits, picked,
                                          item.prepared.relevance.floor, cosine(item, picked),
                                          question_style(item.text, item.prepared.lang)).vector())
    d.update(reader_x=reader_signals(scores).vector(), moved=moved)


def run_folds(items: list[Item], folds: int, target: float | None, cosine: AnswerCosine,
              band: float = SCREEN_BAND, chosen: dict | None = None,
              read: ReadFn | None = None) -> dict[int, dict]:
    """Out-of-fold selection and gate decision per item index: ``{i: {"selection", "gate_x",
    "label", "answered", "hedged", "p", "screened", "full_answered"}}`` (no entry when the floor
    refused; ``answered`` is a confident answer, ``hedged`` a hedged one): the screen decides
    where it is ``band`` or more from its thresholds, the full gate elsewhere; ``full_answered``
    is the full gate's own confident decision. With ``read`` (the readers: English, and the
    student for hi/gu/te), the questions of :data:`READER_SCOPES` carry ``reader_x`` (their
    reader's signals, rag/reader.py, over the top ``reader_k`` candidates: the smallest k whose
    top k holds the answer span for at least :data:`READER_SPAN_SHARE` of English natural
    answerable questions whose candidates hold it, out-of-fold selection) and are decided by
    their reader's model (no screen), fitted on the rows of that reader's languages
    (:data:`READER_GROUPS`) of the other folds. ``target`` None: each fold's operating point per
    language by :func:`choose_target` on the other folds (recorded in ``chosen[fold]`` when
    given), the screen keeping the same target; a number: that target everywhere. Hedge
    thresholds by :func:`choose_hedge` inside the same training folds."""
    groups = np.array([it.group for it in items])
    fold_of = assign_folds(items, folds)
    # Level 1: selection for each item from a selector fitted on the other folds.
    out: dict[int, dict] = {}
    selectors = {}
    for f in range(folds):
        selector = selectors[f] = fit_selector([it for it in items if it.fold != f])
        for i, it in enumerate(items):
            if it.fold != f or it.prepared is None:
                continue
            sel = selector.choose(it.text, it.candidates)
            x = gate_features(it.prepared.hits, sel, it.prepared.relevance.floor,
                              cosine(it, sel), question_style(it.text, it.prepared.lang)).vector()
            out[i] = {"selection": sel, "gate_x": x, "label": gate_label(it, sel)}
    if read is not None:  # the English reader over the top k, k by the 95 % rule
        at_k = span_at_k(items, out)
        k_read = min((k for k, v in at_k.items() if v >= READER_SPAN_SHARE), default=max(at_k))
        for i, d in out.items():
            it = items[i]
            if it.lang not in READER_SCOPES:
                continue
            texts = [c.text for c in (d["selection"].ranked[:k_read] if d["selection"] else ())]
            scores = read(it.prepared.query, texts, it.lang) if texts else []
            d.update(reader_scores=scores, reader_k=k_read, span_at_k=at_k)
        # The pick re-ranked by the selector's and the reader's scores (weights fitted per
        # reader on the other folds' answerable questions), then the gate's signals of it.
        for group in READER_GROUPS.values():
            rows = [i for i, d in out.items() if items[i].lang in group and "reader_scores" in d]
            for f in range(folds):
                weights = fit_pick([(items[i], out[i]) for i in rows if items[i].fold != f])
                for i in rows:
                    if items[i].fold == f:
                        repick(items[i], out[i], weights, selectors[f], cosine)
    # Level 2: gate from the other folds' out-of-fold features, threshold by an inner CV.
    idx = np.array(sorted(out))
    x = np.stack([out[i]["gate_x"] for i in idx])
    label = np.array([-1 if out[i]["label"] is None else out[i]["label"] for i in idx])
    kinds = np.array([items[i].kind for i in idx])
    langs = np.array([items[i].lang for i in idx])
    read_rows = np.array(["reader_x" in out[i] for i in idx])
    xr = np.stack([np.concatenate([out[i]["gate_x"], out[i].get("reader_x", np.zeros(4))])
                   for i in idx])
    g = groups[idx]
    item_fold = fold_of[idx]
    for f in range(folds):
        train = (item_fold != f) & (label >= 0)
        test = item_fold == f
        p, t, h = {}, {}, {}
        targets = None if target is None else dict.fromkeys(("all", *THRESHOLD_SCOPES), target)
        totals = natural_totals(items, lambda it, f=f: it.fold != f)
        offs = off_totals_of(items, lambda it, f=f: it.fold != f)
        for name, n in (("gate", len(GATE_FEATURES)), ("screen", len(SCREEN_FEATURES))):
            scaler, model = _fit(x[train][:, :n], label[train])
            thresholds, targets, hedges = gate_threshold(
                x[train][:, :n], label[train], kinds[train], g[train], langs[train], folds - 1,
                targets, totals, off_totals=offs)
            if chosen is not None and name == "gate":
                chosen[f] = dict(targets)
            p[name] = model.predict_proba(scaler.transform(x[test][:, :n]))[:, 1]
            t[name] = np.array([thresholds.get(items[i].lang, thresholds["all"])
                                for i in idx[test]])
            h[name] = np.array([hedges.get(items[i].lang, hedges["all"]) for i in idx[test]])
        screened = (np.abs(p["screen"] - t["screen"]) >= band) & (
            np.abs(p["screen"] - h["screen"]) >= band)
        final_p = np.where(screened, p["screen"], p["gate"])
        final_t = np.where(screened, t["screen"], t["gate"])
        final_h = np.where(screened, h["screen"], h["gate"])
        full_answered = p["gate"] >= t["gate"]
        for group in READER_GROUPS.values() if read is not None else ():
            in_group = read_rows & np.isin(langs, group)
            rtrain = train & in_group
            rtest = in_group[test]
            if not rtrain.any():
                continue
            scaler, model = _fit(xr[rtrain], label[rtrain])
            rtargets = None if target is None else dict.fromkeys(group, target)
            thresholds, rtargets, hedges = gate_threshold(
                xr[rtrain], label[rtrain], kinds[rtrain], g[rtrain], langs[rtrain], folds - 1,
                rtargets, totals, scopes={lang: (lang,) for lang in group},
                grid=READER_TARGETS, off_totals=offs)
            if chosen is not None:
                chosen[f].update({f"{lang} read": v for lang, v in rtargets.items()})
            pr = model.predict_proba(scaler.transform(xr[test]))[:, 1]
            tr = np.array([thresholds.get(items[i].lang, 2.0) for i in idx[test]])
            hr = np.array([hedges.get(items[i].lang, 2.0) for i in idx[test]])
            final_p = np.where(rtest, pr, final_p)
            final_t = np.where(rtest, tr, final_t)
            final_h = np.where(rtest, hr, final_h)
            screened = screened & ~rtest
            full_answered = np.where(rtest, pr >= tr, full_answered)
        for k, i in enumerate(idx[test]):
            confident = bool(final_p[k] >= final_t[k])
            out[i].update(p=float(final_p[k]), answered=confident,
                          hedged=not confident and bool(final_p[k] >= final_h[k]),
                          screened=bool(screened[k]), full_answered=bool(full_answered[k]))
    return out


def _decision(d: dict | None, gate: bool = True) -> tuple[Selection | None, bool, bool]:
    """(the selection or None where the floor refused, answered confidently, hedged) of one
    question's entry in ``decided``; without the gate every selection counts as answered."""
    sel = d["selection"] if d else None
    answered = sel is not None and (d["answered"] if gate else True)
    hedged = gate and sel is not None and d.get("hedged", False)
    return sel, answered, hedged


def answerable_outcome(it: Item, d: dict | None, gate: bool = True) -> dict[str, bool]:
    """One answerable question's outcome: confident correct / wrong, hedged holding the fact /
    not, the fact delivered (either kind holds it), refused; the text holds the fact when it
    contains the answer span (``eval/README.md``)."""
    sel, answered, hedged = _decision(d, gate)
    holds = sel is not None and it.answer in sel.text
    return {"correct": answered and holds, "wrong": answered and not holds,
            "hedged_right": hedged and holds, "hedged_wrong": hedged and not holds,
            "delivered": (answered or hedged) and holds, "refused": not (answered or hedged)}


def report(items: list[Item], decided: dict[int, dict], gate: bool = True) -> dict:
    """Per language: natural answerable correct / wrong / refused (confident answers), hedged
    right / wrong, the fact delivered (a confident or hedged answer holds it), near-misses
    answered confidently / hedged, and the dataset categories answered (either kind); with n
    and the median answer length."""
    table: dict[str, dict] = defaultdict(lambda: defaultdict(list))
    chars: dict[str, list[int]] = defaultdict(list)
    for i, it in enumerate(items):
        d = decided.get(i)
        sel, answered, hedged = _decision(d, gate)
        row = table[it.lang]
        if it.kind == "answerable":
            for key, value in answerable_outcome(it, d, gate).items():
                row[f"answerable_{key}"].append(value)
            # the candidates are the top hits read in the question's language
            row["answerable_in_top5"].append(any(it.answer in c.source.text
                                                 for c in it.candidates))
        elif it.kind == "near_miss":
            row["near_miss_answered"].append(answered)
            row["near_miss_hedged"].append(hedged)
        else:
            row[f"{it.kind}_answered"].append(answered or hedged)
        if answered or hedged:
            chars[it.lang].append(len(sel.text))
    out = {}
    for lang in LANGUAGES:
        if lang not in table:
            continue
        out[lang] = {k: {"n": len(v), "share": sum(v) / len(v)} for k, v in table[lang].items()}
        out[lang]["median_answer_chars"] = statistics.median(chars[lang]) if chars[lang] else None
    return out


ROWS = (
    ("answerable_correct", "natural answerable: confident, correct"),
    ("answerable_wrong", "natural answerable: confident, wrong"),
    ("answerable_hedged_right", "natural answerable: hedged, holds the fact"),
    ("answerable_hedged_wrong", "natural answerable: hedged, misses it"),
    ("answerable_delivered", "natural answerable: fact delivered (either)"),
    ("answerable_refused", "natural answerable: refused"),
    ("answerable_in_top5", "natural answerable: span in a top-5 passage"),
    ("near_miss_answered", "natural near-miss: answered confidently"),
    ("near_miss_hedged", "natural near-miss: hedged"),
    ("off_corpus_answered", "off-corpus: answered (either kind)"),
    ("dataset_answerable_answered", "dataset answerable: answered (either)"),
    ("no_answer_present_answered", "dataset No Answer Present: answered"),
    ("not_in_corpus_answered", "dataset not-in-corpus: answered (either)"),
)


STYLES = ("typed", "spoken", "code_mixed", "latin")
STYLE_ROWS = (
    ("floor_refused", "refused by the floor"),
    ("span_read", "span in a candidate the reader reads"),
    ("no_gate", "the pick holds it (no gate)"),
    ("delivered", "fact delivered (confident or hedged)"),
    ("confident", "confident, correct"),
    ("wrong", "confident, wrong"),
)
"""Per style, the shares of natural answerable questions, from the widest to the narrowest: what
the floor lets through, what a perfect picker over the candidates read could give, what the pick
gives when everything is answered, what the gate lets out."""


def style_report(items: list[Item], decided: dict[int, dict]) -> dict[str, dict[str, dict]]:
    """Out of fold, per language and style (:data:`STYLES`), over natural answerable questions:
    ``{lang: {style: {"n": int, "floor_refused": share, ...}}}`` with the shares of
    :data:`STYLE_ROWS` (0-1). The candidates read are the reader's top ``reader_k`` (all
    candidates where nothing was read)."""
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for lang in LANGUAGES:
        for style in STYLES:
            rows = [(it, decided.get(i)) for i, it in enumerate(items) if it.lang == lang
                    and it.style == style and it.kind == "answerable"]
            if not rows:
                continue
            counts = dict.fromkeys((key for key, _ in STYLE_ROWS), 0)
            for it, d in rows:
                gated, floors = answerable_outcome(it, d), answerable_outcome(it, d, gate=False)
                counts["floor_refused"] += floors["refused"]
                counts["no_gate"] += floors["correct"]
                counts["delivered"] += gated["delivered"]
                counts["confident"] += gated["correct"]
                counts["wrong"] += gated["wrong"]
                if d and d["selection"] is not None:
                    read = d["read"][0] if d.get("read") else d["selection"].ranked
                    counts["span_read"] += any(it.answer in c.text for c in read)
            out[lang][style] = {"n": len(rows)} | {k: v / len(rows) for k, v in counts.items()}
    return dict(out)


def print_style_report(rep: dict[str, dict[str, dict]]) -> None:
    print("\nnatural answerable questions by style, out of fold (% of n)")
    cols = [(lang, style) for lang in rep for style in rep[lang]]
    print(f"{'':<40}" + "".join(f"{lang + ' ' + style[:6]:>12}" for lang, style in cols))
    print(f"{'n':<40}" + "".join(f"{rep[lang][style]['n']:>12}" for lang, style in cols))
    for key, label in STYLE_ROWS:
        print(f"{label:<40}" + "".join(f"{100 * rep[lang][style][key]:>11.1f}%"
                                        for lang, style in cols))


TARGETS_BY_ISSUE = {
    "en": {"confident": (0.65, "#31"), "delivered": (0.80, "#31")},
    "hi": {"confident": (0.55, "#32"), "delivered": (0.75, "#32")},
    "gu": {"confident": (0.50, "#32")},
    "te": {"confident": (0.50, "#32")},
}
"""The acceptance figures of issues 31 and 32 on the test set (all styles together), drawn beside
the out-of-fold shares; Hindi in Latin letters has its own (confident 0.40, issue 32)."""


def plot_styles(rep: dict[str, dict[str, dict]], out: Path) -> None:
    """``out`` (PNG): per language and style, the :data:`STYLE_ROWS` shares after the floor as
    bars from the widest to the narrowest, with the issues' targets as ticks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k, _ in STYLE_ROWS if k not in ("floor_refused", "wrong")]
    labels = dict(STYLE_ROWS)
    fig, axes = plt.subplots(1, len(rep), figsize=(3.2 * len(rep), 4.2), sharey=True)
    for ax, lang in zip(np.atleast_1d(axes), rep, strict=True):
        styles = list(rep[lang])
        width = 0.8 / len(keys)
        for j, key in enumerate(keys):
            ax.bar(np.arange(len(styles)) + (j - (len(keys) - 1) / 2) * width,
                   [100 * rep[lang][s][key] for s in styles], width, label=labels[key])
        for key, (target, issue) in TARGETS_BY_ISSUE.get(lang, {}).items():
            ax.axhline(100 * target, color="black" if key == "confident" else "grey",
                       linestyle="--" if key == "confident" else ":", linewidth=0.9)
            ax.annotate(f"{issue} {key} {100 * target:.0f}", (len(styles) - 0.5, 100 * target),
                        fontsize=6, ha="right", va="bottom")
        ticks = [f"{s}\nn={rep[lang][s]['n']}, floor\n"
                 f"refuses {100 * rep[lang][s]['floor_refused']:.0f} %" for s in styles]
        ax.set_xticks(range(len(styles)), ticks, fontsize=7)
        ax.set_xlim(-0.5, len(styles) - 0.5)
        ax.set_title(lang)
        ax.set_ylim(0, 100)
    np.atleast_1d(axes)[0].set_ylabel("% of natural answerable questions (out of fold)")
    handles, names = np.atleast_1d(axes)[0].get_legend_handles_labels()
    fig.legend(handles, names, fontsize=7, loc="lower center", ncol=len(keys))
    fig.suptitle("Where the answer is lost: floor, candidates read, pick, gate", fontsize=9)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    print(f"written {out}")


def print_report(title: str, rep: dict) -> None:
    print(f"\n{title}")
    print(f"{'':<46}" + "".join(f"{lang:>14}" for lang in LANGUAGES))
    for key, label in ROWS:
        cells = []
        for lang in LANGUAGES:
            r = rep.get(lang, {}).get(key)
            cells.append(f"{'-':>14}" if not r or not r["n"] else
                         f"{100 * r['share']:>7.1f}% ({r['n']:>3})")
        print(f"{label:<46}" + "".join(cells))
    med = "".join(f"{str(rep.get(lang, {}).get('median_answer_chars')):>14}" for lang in LANGUAGES)
    print(f"{'median answer length, chars':<46}{med}")


def plot(items: list[Item], decided: dict[int, dict], settings: RagSettings, out_dir: Path) -> None:
    """Two PNGs in ``out_dir``: the top-1 cosine of each kind of question with the language's
    floor (en, hi), and the gate's calibration (out-of-fold probability vs share of right
    answers among the natural answerable questions and near-misses it would answer)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    kinds = (("answerable", "natural answerable"), ("near_miss", "natural near-miss"),
             ("off_corpus", "off-corpus"), ("not_in_corpus", "dataset not in corpus"))
    for ax, lang in zip(axes, ("en", "hi"), strict=True):
        for kind, label in kinds:
            scores = [it.prepared.hits[0].score if it.prepared else np.nan for it in items
                      if it.lang == lang and it.kind == kind]
            scores = [x for x in scores if not np.isnan(x)]
            if scores:
                ax.hist(scores, bins=np.linspace(0.78, 0.95, 35), alpha=0.5, density=True,
                        label=f"{label} (n={len(scores)} over the floor)")
        ax.axvline(settings.floor(lang), color="black", linestyle="--", label="floor")
        ax.set_title(f"{lang}: top-1 cosine of questions that cleared the floor")
        ax.set_xlabel("cosine")
    axes[0].set_ylabel("density")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / "natural_scores.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5, 4))
    rows = [(d["p"], d["label"]) for d in decided.values() if "p" in d and d["label"] is not None]
    p = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows])
    edges = np.linspace(0, 1, 11)
    centres, shares, counts = [], [], []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        mask = (p >= lo) & (p < hi)
        if mask.sum() >= 5:
            centres.append(p[mask].mean())
            shares.append(y[mask].mean())
            counts.append(int(mask.sum()))
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":")
    ax.plot(centres, shares, marker="o")
    for c, s_, n in zip(centres, shares, counts, strict=True):
        ax.annotate(str(n), (c, s_), fontsize=7, xytext=(3, -9), textcoords="offset points")
    ax.set_xlabel("gate probability (out of fold)")
    ax.set_ylabel("share that should be answered")
    ax.set_title("Answerability gate calibration")
    fig.tight_layout()
    fig.savefig(out_dir / "gate_calibration.png", dpi=110)
    plt.close(fig)
    print(f"written {out_dir / 'natural_scores.png'} and {out_dir / 'gate_calibration.png'}")


def reader_report(items: list[Item], decided: dict[int, dict], lang: str) -> None:
    """``lang``, out of fold: how often the reader's top candidate holds the span beside the
    selector's pick (of the questions whose read candidates hold it), and how well the reader's
    signals tell a right answer from a wrong one or a near-miss (ROC AUC)."""
    rows = [(it, decided[i]) for i, it in enumerate(items) if i in decided and it.lang == lang
            and "reader_scores" in decided[i] and it.kind in ("answerable", "near_miss")]
    hold = [(it, d) for it, d in rows if it.kind == "answerable"
            and any(it.answer in c.text for c in d["read"][0])]
    if not hold:
        return
    sel_top = np.mean([it.answer in d["read"][0][0].text for it, d in hold])
    read_top = np.mean([it.answer in d["read"][0][int(np.argmax(d["read"][1]))].text
                        for it, d in hold])
    both_top = np.mean([it.answer in d["selection"].best.text for it, d in hold])
    moved = np.mean([d["moved"] > 0 for _, d in rows])
    print(f"  {lang}: of {len(hold)} answerable questions with the span among the candidates "
          f"read, the top one holds it: selector {100 * sel_top:.1f} %, reader "
          f"{100 * read_top:.1f} %, both (the pick) {100 * both_top:.1f} %; the pick moved off "
          f"the selector's for {100 * moved:.1f} % of {len(rows)} natural questions")
    y = np.array([d["label"] for _, d in rows])
    if len(set(y)) == 2:
        for j, name in enumerate(("reader_pick", "reader_best", "reader_margin",
                                  "reader_agrees")):
            auc = roc_auc_score(y, [d["reader_x"][j] for _, d in rows])
            print(f"    {name:<16} ROC AUC right answer vs wrong/near-miss ({lang} natural): "
                  f"{max(auc, 1 - auc):.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", type=Path, default=RagSettings.from_env().index_dir)
    parser.add_argument("--data", type=Path, default=SHARED_SAMPLE.parent)
    parser.add_argument("--questions", type=Path, nargs="+", default=TRAINING)
    parser.add_argument("--not-in-corpus", type=int, default=150)
    parser.add_argument("--target", type=float, default=None,
                        help="one share of right natural answers for the gate to keep in every "
                        "language (default: each language's by choose_target, inner CV)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--curve", type=float, nargs="*", default=[],
                        help="also report these other targets (out of fold, en/hi)")
    parser.add_argument("--json", type=Path, help="write the report as JSON")
    parser.add_argument("--cache", type=Path, help="pickle of retrieval results (see collect)")
    parser.add_argument("--plots", type=Path, help="write PNG plots into this folder")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--screen-band", type=float, default=SCREEN_BAND,
                        help="probability distance at which the screen decides alone")
    parser.add_argument("--no-reader", action="store_true",
                        help="without the English reader (no reader_models in the gate file)")
    parser.add_argument("--reader-cache", type=Path,
                        help="pickle of the reader's scores by (question, candidate)")
    args = parser.parse_args(argv)

    settings = replace(RagSettings.from_env(), index_dir=args.index, use_gate=False)
    encoder = load_encoder(settings.encoder)
    index = PassageIndex.load(settings.index_dir, encoder_name=encoder.name,
                              encoder_dim=encoder.dim)
    fusion = load_fusion() if settings.retrieval == "hybrid" else None
    pipeline = Pipeline(settings, encoder, index, gate=None, selector=AnswerSelector.neutral(),
                        fusion=fusion)
    fitted_for = {"encoder_variant": encoder.variant, "retrieval": settings.retrieval}
    natural = [json.loads(line) for path in args.questions
               for line in path.open(encoding="utf-8") if line.strip()]
    items = collect(pipeline, natural, load_cases(args.data, args.not_in_corpus), args.cache)
    cosine = answer_cosines(pipeline)
    read, save_reads = (None, lambda: None) if args.no_reader else reader_scores(args.reader_cache)
    chosen: dict[int, dict] = {}
    decided = run_folds(items, args.folds, args.target, cosine, args.screen_band, chosen, read)
    save_reads()
    read_k = next((d["reader_k"] for d in decided.values() if "reader_k" in d), None)
    if read_k is not None:
        at_k = next(d["span_at_k"] for d in decided.values() if "span_at_k" in d)
        print("\nEnglish natural answerable questions whose candidates hold the span: the share "
              "that hold it in the out-of-fold selector's top k: " + ", ".join(
                  f"k={k} {100 * v:.1f} %" for k, v in at_k.items()))
        print(f"  the reader reads the top {read_k} (the smallest k holding it for >= "
              f"{100 * READER_SPAN_SHARE:.0f} %)")
        for lang in READER_SCOPES:
            reader_report(items, decided, lang)

    floors_only = report(items, decided, gate=False)
    gated = report(items, decided)
    print_report("selection out of fold, floors alone (no gate)", floors_only)
    print_report("selection + gate, out of fold (nested thresholds)", gated)
    by_style = style_report(items, decided)
    print_style_report(by_style)
    print("\ntargets chosen in each fold's training folds: " + "; ".join(
        f"{lang} " + "/".join(f"{chosen[f][lang]:.2f}" for f in sorted(chosen))
        for lang in (*THRESHOLD_SCOPES, *(f"{r} read" for r in READER_SCOPES))
        if all(lang in chosen[f] for f in chosen)))

    if args.curve:
        print("\nother targets, out of fold (correct / wrong / near-miss answered, %):")
        for target in args.curve:
            rep = report(items, run_folds(items, args.folds, target, cosine, args.screen_band,
                                          read=read))
            cells = "   ".join(
                f"{lang} {100 * rep[lang]['answerable_correct']['share']:.1f} / "
                f"{100 * rep[lang]['answerable_wrong']['share']:.1f} / "
                f"{100 * rep[lang]['near_miss_answered']['share']:.1f}"
                for lang in LANGUAGES if lang in rep
            )
            print(f"  target {target:.2f}: {cells}")
        # folds back to --target
        decided = run_folds(items, args.folds, args.target, cosine, args.screen_band, read=read)

    reached = [d for d in decided.values() if "screened" in d]
    print(f"\nscreen (band {args.screen_band}): decided alone for "
          f"{100 * np.mean([d['screened'] for d in reached]):.1f} % of the {len(reached)} cases "
          "that reached the gate (the answer embedded for the rest); decisions that differ from "
          f"the full gate's: {sum(d['answered'] != d['full_answered'] for d in reached)}")

    idx = [i for i in decided if decided[i]["label"] is not None]
    x = np.stack([decided[i]["gate_x"] for i in idx])
    y = np.array([decided[i]["label"] for i in idx])
    is_natural = np.array([items[i].kind in ("answerable", "near_miss") for i in idx])
    print("\ngate signals, ROC AUC alone (out-of-fold selection): all cases that reach the gate;"
          " natural questions only (a right answer vs a wrong one or a near-miss)")
    for j, name in enumerate(GATE_FEATURES):
        aucs = [roc_auc_score(y[m], x[m, j]) for m in (slice(None), is_natural)]
        print(f"  {name:<22}" + "".join(f"{max(a, 1 - a):8.3f}" for a in aucs))

    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"floors_only": floors_only, "gated": gated,
                                         "by_style": by_style}, indent=1) + "\n",
                             encoding="utf-8")
    if args.plots:
        plot(items, decided, settings, args.plots)
        plot_styles(by_style, args.plots / "answer_losses.png")
    if args.dry_run:
        return 0
    selector = fit_selector(items)
    sel_model = {
        "features": list(SELECTION_FEATURES),
        "mean": selector.mean.tolist(),
        "scale": selector.scale.tolist(),
        "coef": selector.coef.tolist(),
        "intercept": selector.intercept,
        "two_sentences": selector.two_sentences,
        **fitted_for,
        "fitted_on": f"{sum(it.labels is not None for it in items)} answerable training "
        f"questions ({', '.join(str(p.name) for p in args.questions)}), encoder "
        f"{pipeline.encoder.name}",
    }
    selection_module.MODEL_PATH.write_text(json.dumps(sel_model, indent=1) + "\n",
                                           encoding="utf-8")
    kinds = np.array([items[i].kind for i in idx])
    langs = np.array([items[i].lang for i in idx])
    groups = np.array([items[i].group for i in idx])

    targets = None if args.target is None else dict.fromkeys(("all", *THRESHOLD_SCOPES),
                                                              args.target)
    totals = natural_totals(items)
    offs = off_totals_of(items)

    def scoped_models(n: int) -> dict[str, dict]:
        """The logistic model over the first ``n`` gate signals with its per-scope thresholds
        and hedge thresholds (the screen keeps the targets chosen for the full gate)."""
        nonlocal targets
        scaler, model = _fit(x[:, :n], y)
        thresholds, targets, hedges = gate_threshold(x[:, :n], y, kinds, groups, langs,
                                                     args.folds, targets, totals, off_totals=offs)
        return {
            scope: {
                "mean": scaler.mean_.tolist(),
                "scale": scaler.scale_.tolist(),
                "coef": model.coef_[0].tolist(),
                "intercept": float(model.intercept_[0]),
                "threshold": t,
                "hedge_threshold": hedges[scope],
                "target": targets[scope],
            }
            for scope, t in thresholds.items()
        }

    def reader_models() -> dict[str, dict]:
        """Each reader's model (gate signals + the reader's) per language of its
        :data:`READER_GROUPS` entry, fitted on those languages' cases with their out-of-fold
        reader signals."""
        models: dict[str, dict] = {}
        for group in READER_GROUPS.values() if read is not None else ():
            rows = [k for k, i in enumerate(idx)
                    if "reader_x" in decided[i] and items[i].lang in group]
            if not rows:
                continue
            xr = np.stack([np.concatenate([decided[idx[k]]["gate_x"],
                                           decided[idx[k]]["reader_x"]]) for k in rows])
            scaler, model = _fit(xr, y[rows])
            pick = fit_pick([(items[i], decided[i]) for i in decided
                             if items[i].lang in group and "reader_scores" in decided[i]])
            rtargets = None if args.target is None else dict.fromkeys(group, args.target)
            thresholds, rtargets, hedges = gate_threshold(
                xr, y[rows], kinds[rows], groups[rows], langs[rows], args.folds, rtargets,
                totals, scopes={lang: (lang,) for lang in group}, grid=READER_TARGETS,
                off_totals=offs)
            models.update({scope: {"mean": scaler.mean_.tolist(),
                                   "scale": scaler.scale_.tolist(),
                                   "coef": model.coef_[0].tolist(),
                                   "intercept": float(model.intercept_[0]),
                                   "threshold": t, "hedge_threshold": hedges[scope],
                                   "target": rtargets[scope], "pick": pick}
                           for scope, t in thresholds.items()})
        return models

    gate_module.MODEL_PATH.write_text(json.dumps({
        "features": list(GATE_FEATURES),
        "models": scoped_models(len(GATE_FEATURES)),
        "screen": scoped_models(len(SCREEN_FEATURES)),
        "screen_band": args.screen_band,
        "reader_features": list(READER_FEATURES),
        "reader_models": reader_models(),
        "reader_top_k": read_k or 0,
        **fitted_for,
        "fitted_on": f"{len(idx)} cases clearing the floor (training questions + dataset queries "
        f"+ off-corpus), out-of-fold selection, encoder {pipeline.encoder.name}",
        "cv": f"GroupKFold({args.folds}) by query_id; thresholds keep each scope's target of "
        "right natural answers on inner out-of-fold probabilities, the target "
        + ("chosen by choose_target (bounds: WRONG_BOUND, NEAR_MISS_BOUND)" if args.target is None
           else f"{args.target} (--target)") + "; hedge thresholds by choose_hedge (a hedged "
        f"band holds the fact for >= {HEDGE_PRECISION} of its natural questions and dataset "
        f"not-in-corpus queries, off-corpus answered <= {OFF_CORPUS_BOUND})",
    }, indent=1) + "\n", encoding="utf-8")
    AnswerabilityGate.load()  # the file reads back
    print(f"\nwritten {selection_module.MODEL_PATH} and {gate_module.MODEL_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
