"""Fit answer selection and the answerability gate, and report both out of fold.

    python scripts/fit_answering.py                  # report, write rag/selector_model.json and
                                                     # rag/gate_model.json, plots in docs/img/
    python scripts/fit_answering.py --dry-run        # report only

Data (all real): the project's training questions (``eval/training/*.jsonl``, issue 22: answerable
questions with a verbatim answer span, and near-misses whose fact no passage of the topic states,
typed, spoken, code-mixed and in Latin letters), the shared sample's dataset queries (answerable,
"No Answer Present", a sample of those whose passages are not in the sample) and its off-corpus
questions (``scripts/evaluate.py`` ``load_cases``). The test set (``eval/natural_questions.jsonl``,
``eval/test_as_spoken.jsonl``) is never read here: ``scripts/report_test_set.py`` reports the
shipped pipeline on it. Retrieval is the production one (hybrid where ``rag/fusion.json`` says).

1. **Selection** (rag/selection.py): every sentence of the top-k hits is a candidate, positive when
   it contains the answer span; a logistic model over the candidate features, fitted on the
   natural answerable questions.
2. **Gate** (rag/answer/gate.py): a logistic model over the question's top cosine and its selected
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
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupKFold

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from answering_report import (  # noqa: E402
    plot,
    plot_styles,
    print_report,
    print_style_report,
    reader_report,
    report,
    style_report,
)
from evaluate import load_cases  # noqa: E402
from operating_points import (  # noqa: E402
    HEDGE_PRECISION,
    OFF_CORPUS_BOUND,
    READER_TARGETS,
    TARGETS,
    THRESHOLD_SCOPES,
    fit_logistic,
    gate_threshold,
)

from rag import followup  # noqa: E402
from rag import selection as selection_module  # noqa: E402
from rag.answer import (  # noqa: E402
    FEATURES,
    MODEL_PATH,
    READER_OF,
    SCREEN_FEATURES,
    GateModels,
    LogisticModel,
    gate_features,
    load_readers,
    question_style,
    reader_signals,
    repick,
)
from rag.answer.gate import BOUND_MARGIN  # noqa: E402
from rag.answer.readers import reader_groups  # noqa: E402
from rag.encoders import load_encoder  # noqa: E402
from rag.index import PassageIndex  # noqa: E402
from rag.pipeline import Pipeline  # noqa: E402
from rag.prepared import Prepared  # noqa: E402
from rag.retrieval import load_fusion  # noqa: E402
from rag.selection import (  # noqa: E402
    AnswerSelector,
    Candidate,
    Selection,
    candidate_features,
)
from rag.settings import SHARED_SAMPLE, RagSettings  # noqa: E402
from rag.types import LANGUAGES, Result, Trace, Turn  # noqa: E402

TRAINING = sorted((ROOT / "eval" / "training").glob("*.jsonl"))
FOLLOWUPS = sorted((ROOT / "eval" / "followups").glob("train_*.jsonl"))
"""Training follow-up pairs (issue 44): their second messages, read after the first as the
pipeline reads them, are fitted on like natural questions (a no-answer one as a negative)."""
NEAR_CORPUS = ROOT / "eval" / "training" / "near_corpus" / "near_corpus.jsonl"
"""Questions no passage answers whose words sit near some passage (issue 42: "1 किलोग्राम में
कितने ग्राम होते हैं?" was hedged with a chemistry-homework extract): negatives of the gate."""
READER_GROUPS = reader_groups(LANGUAGES)
"""The languages each reader reads (``rag.answer.READER_OF``): one set of re-pick weights per
reader, one gate model per language."""
READER_SCOPES = tuple(lang for lang in LANGUAGES if lang in READER_OF)
READER_SPAN_SHARE = 0.95
"""Issue 31: the reader reads the selector's top k candidates, k the smallest whose top k holds
the answer span for at least this share of the training questions (English, those whose
candidates hold it at all); written to the gate file as ``reader_top_k``."""


@dataclass
class Item:
    """One question and what retrieval gave it. ``kind`` is answerable/near_miss/near_corpus
    (natural), followup/followup_no_answer (the second message of a training follow-up pair,
    ``after`` its first question) or a dataset category (answerable is then
    ``dataset_answerable``); ``candidates`` is empty when the floor refused it."""

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
    after: str | None = None


def collect(
    pipeline: Pipeline, natural: list[dict], cases: list, cache: Path | None = None,
    followups: list[dict] = (),
) -> list[Item]:
    """Retrieve every question once (floors applied, no gate) and build its candidates; the
    second message of a follow-up pair (``followups``, ``eval/followups/train_*``) is read after
    its first question as the pipeline reads it (``after=``; :func:`turn_of`).

    ``cache``: a pickle of the retrieval results by question text (a follow-up's by its first
    question and its text; read when present, written when it was missing or lacked a
    question), so refitting after a change to the features skips the query embeddings; it must
    come from the same index and encoder."""
    retrieved: dict = {}
    if cache is not None and cache.is_file():
        retrieved = pickle.loads(cache.read_bytes())
    items: list[Item] = []
    for row in natural:
        group = row.get("query_id", -1_000_000 - len(items))  # near_corpus: its own group
        items.append(Item(row["question"], row["lang"], row["kind"], group,
                          row.get("answer", ""), row.get("style", "")))
    for i, case in enumerate(cases):
        kind = "dataset_answerable" if case.category == "answerable" else case.category
        group = case.query_id if case.query_id is not None else -1 - i
        items.append(Item(case.text, case.lang, kind, group))
    for row in followups:
        kind = "followup_no_answer" if row["kind"] == "no_answer" else "followup"
        items.append(Item(row["question"], row["lang"], kind, row["query_id"],
                          row.get("answer") or "", row["style"], after=row["first"]["question"]))
    n_cached = len(retrieved)
    for item in items:
        key = item.text if item.after is None else (item.after, item.text)
        if key not in retrieved:
            turn = None
            if item.after is not None:
                if item.after not in retrieved:
                    retrieved[item.after] = pipeline.prepare(item.after, None, None, Trace())
                turn = turn_of(retrieved[item.after])
            retrieved[key] = pipeline.prepare(item.text, None, None, Trace(), turn)
        prepared = retrieved[key]
        if not isinstance(prepared, Prepared):
            continue
        prepared.selection = None  # retrieval only: candidates are rebuilt below
        item.prepared = prepared
        lang = prepared.lang

        def in_language(hit, lang=lang):
            return pipeline.in_language(hit, lang)

        item.candidates = candidate_features(
            prepared.query, lang, prepared.hits, in_language, pipeline.answers.idf
        )
        if item.answer:
            item.labels = np.array([item.answer in c.text for c in item.candidates], dtype=int)
    if cache is not None and len(retrieved) > n_cached:
        cache.write_bytes(pickle.dumps(retrieved))
    return items


def turn_of(first: Prepared | Result) -> Turn:
    """The previous turn a follow-up pair's first question leaves, as a chat keeps it: the
    question as searched and its top hits (no answer is chosen here)."""
    if isinstance(first, Prepared):
        return Turn(first.query, first.lang, tuple(h.passage.id for h in first.hits[:3]))
    return followup.turn_after(first)


def fit_selector(items: list[Item]) -> AnswerSelector:
    """Selector over the candidates of natural answerable questions with a positive candidate."""
    rows = [it for it in items if it.labels is not None and it.labels.any()]
    x = np.concatenate([np.stack([c.features.vector() for c in it.candidates]) for it in rows])
    y = np.concatenate([it.labels for it in rows])
    m = fit_logistic(x, y)
    return AnswerSelector(m.mean, m.scale, m.coef, m.intercept)


def gate_label(item: Item, selection: Selection | None) -> int | None:
    """1 answer, 0 refuse, None not trained on ("No Answer Present")."""
    if item.kind in ("answerable", "followup"):
        return int(selection is not None and item.answer in selection.text)
    if item.kind == "dataset_answerable":
        return 1
    if item.kind == "no_answer_present":
        return None
    return 0


SCREEN_BAND = 0.2
"""How far (in probability) the screen must be from its thresholds to decide without embedding
the answer (rag/answer/gate.py): a speed knob, chosen on how often the screen decides alone and
how many of its decisions differ from the full gate's, which ``main`` prints
(``--screen-band``; the figures when it was chosen: docs/history.md, "The answer's own vector
as a gate signal"). The correctness figures reported are those of the screened gate."""

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
    """The readers (``rag.answer.load_readers``: the English reader for English, the student
    for hi/gu/te) with every pair they score kept in a pickle at ``cache_path`` (read when
    present), by reader: ``(read, save)``, ``read(question, texts, lang)``."""
    from rag.model_files import sha256_of
    from rag.student_reader import HEAD_FILE, default_student_dir

    readers = load_readers(READER_SCOPES)
    tags = {"english": "en",  # the pretrained reader's files are fixed (sha256-checked)
            "student": "student:" + sha256_of(default_student_dir() / HEAD_FILE)[:16]}
    cache: dict = {}
    if cache_path is not None and cache_path.is_file():
        cache = pickle.loads(cache_path.read_bytes())
    n_cached = len(cache)

    def read(question: str, texts: list[str], lang: str = "en") -> list[float]:
        tag = tags[READER_OF[lang]]
        todo = [t for t in dict.fromkeys(texts) if (tag, question, t) not in cache]
        if todo:
            for t, score in zip(todo, readers[lang].score(question, todo), strict=True):
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


def repick_item(item: Item, d: dict, weights: list[float], selector: AnswerSelector,
                cosine: AnswerCosine) -> None:
    """Re-pick ``item``'s answer as the pipeline does (``rag.answer.repick``) by ``weights`` and
    update its decision entry ``d`` (selection, reader scores in the new order, gate signals,
    label, reader signals; ``moved``: the selector's rank of the new pick; ``read``: the
    candidates read and their scores in the selector's order, for the reader report)."""
    sel, scores = d["selection"], d["reader_scores"]
    d.setdefault("read", (sel.ranked[:len(scores)], list(scores)) if scores else ((), []))
    moved = 0
    if scores:
        picked, scores, moved = repick(selector, item.text, sel, scores, weights)
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
    assign_folds(items, folds)
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
            out[i] = {"selection": sel, "gate_x": x, "gate_x0": x, "label": gate_label(it, sel)}
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
            read_rows = [i for i, d in out.items() if items[i].lang in group
                         and "reader_scores" in d]
            for f in range(folds):
                weights = fit_pick([(items[i], out[i]) for i in read_rows if items[i].fold != f])
                for i in read_rows:
                    if items[i].fold == f:
                        repick_item(items[i], out[i], weights, selectors[f], cosine)
    # Level 2: gate from the other folds' out-of-fold features, threshold by an inner CV.
    rows = GateRows.of(items, out)
    for f in range(folds):
        train = (rows.fold != f) & (rows.label >= 0)
        test = rows.fold == f
        gate, targets = fit_gate(rows, train, folds - 1, target, band,
                                 natural_totals(items, lambda it, f=f: it.fold != f),
                                 off_totals_of(items, lambda it, f=f: it.fold != f))
        if chosen is not None:
            chosen[f] = targets
        d = gate.decisions(rows.langs[test], rows.x[test], rows.reader_x[test],
                           ceiling_x=rows.x0[test])
        for k, i in enumerate(rows.idx[test]):
            out[i].update(p=float(d.p[k]), answered=bool(d.confident[k]),
                          hedged=bool(d.hedged[k]), screened=bool(d.screened[k]),
                          full_answered=bool(d.full_confident[k]), unread=bool(d.skipped[k]))
    return out


@dataclass
class GateRows:
    """The gate's training rows, one per question that reached the gate (``idx`` into the
    items): its signals ``x`` (n, len(FEATURES)), its reader's ``reader_x`` (n, 4; NaN where
    not read), ``label`` (1 answer, 0 refuse, -1 not trained on), ``kinds``, ``langs``,
    ``groups`` (query_id) and ``fold``."""

    idx: np.ndarray
    x: np.ndarray
    reader_x: np.ndarray
    x0: np.ndarray
    label: np.ndarray
    kinds: np.ndarray
    langs: np.ndarray
    groups: np.ndarray
    fold: np.ndarray

    @classmethod
    def of(cls, items: list[Item], out: dict[int, dict]) -> GateRows:
        idx = np.array(sorted(out))
        return cls(idx, np.stack([out[i]["gate_x"] for i in idx]),
                   np.stack([out[i].get("reader_x", np.full(4, np.nan)) for i in idx]),
                   np.stack([out[i].get("gate_x0", out[i]["gate_x"]) for i in idx]),
                   np.array([-1 if out[i]["label"] is None else out[i]["label"] for i in idx]),
                   np.array([items[i].kind for i in idx]), np.array([items[i].lang for i in idx]),
                   np.array([items[i].group for i in idx]), np.array([items[i].fold for i in idx]))


def fit_scopes(x: np.ndarray, rows: GateRows, mask: np.ndarray, folds: int,
               targets: dict[str, float] | None, totals: dict, offs: dict,
               scopes: dict[str, tuple[str, ...]] | None = None, grid: tuple = TARGETS,
               pick: list[float] | None = None) -> tuple[dict[str, LogisticModel], dict]:
    """One logistic model over ``x[mask]`` with a confident threshold, hedge threshold and
    target per scope (:func:`gate_threshold`): ``({scope: model}, {scope: target})``."""
    model = fit_logistic(x[mask], rows.label[mask])
    thresholds, chosen, hedges = gate_threshold(
        x[mask], rows.label[mask], rows.kinds[mask], rows.groups[mask], rows.langs[mask], folds,
        targets, totals, scopes, grid, off_totals=offs)
    bounds = None
    if pick is not None:  # a reader model: the range of what it reads after the screen
        later = x[mask][:, len(SCREEN_FEATURES):]
        lo, hi = later.min(axis=0), later.max(axis=0)
        bounds = tuple(zip((lo - BOUND_MARGIN * (hi - lo)).tolist(),
                           (hi + BOUND_MARGIN * (hi - lo)).tolist(), strict=True))
    return {scope: replace(model, threshold=t, hedge_threshold=hedges[scope],
                           target=chosen[scope], pick=None if pick is None else tuple(pick),
                           bounds=bounds)
            for scope, t in thresholds.items()}, chosen


def fit_gate(rows: GateRows, mask: np.ndarray, folds: int, target: float | None, band: float,
             totals: dict, offs: dict, picks: dict[str, list[float]] | None = None,
             top_k: int = 0, meta: dict | None = None) -> tuple[GateModels, dict[str, float]]:
    """The whole gate fitted on ``rows[mask]``, for one fold or the shipped file: the full
    gate and the screen per language (the screen keeping the targets chosen for the full gate),
    and each reader's model per language it reads (:data:`READER_GROUPS`, on the rows it read,
    with ``picks[reader]`` as its re-pick weights); thresholds by an inner ``folds``-fold CV.
    Returns the :class:`GateModels` and the targets chosen (reader scopes as ``"<lang> read"``)."""
    targets = None if target is None else dict.fromkeys(("all", *THRESHOLD_SCOPES), target)
    models, targets = fit_scopes(rows.x, rows, mask, folds, targets, totals, offs)
    screen, _ = fit_scopes(rows.x[:, :len(SCREEN_FEATURES)], rows, mask, folds, targets, totals,
                           offs)
    chosen = dict(targets)
    readers: dict[str, LogisticModel] = {}
    xr = np.hstack([rows.x, rows.reader_x])
    for kind, group in READER_GROUPS.items():
        in_group = mask & np.isfinite(rows.reader_x).all(axis=1) & np.isin(rows.langs, group)
        if not in_group.any():
            continue
        rtargets = None if target is None else dict.fromkeys(group, target)
        fitted, rtargets = fit_scopes(xr, rows, in_group, folds, rtargets, totals, offs,
                                      {lang: (lang,) for lang in group}, READER_TARGETS,
                                      None if picks is None else picks[kind])
        readers.update(fitted)
        chosen.update({f"{lang} read": v for lang, v in rtargets.items()})
    return GateModels(models, screen, band, readers, top_k or 4, meta or {}), chosen


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
    natural = [json.loads(line) for path in (*args.questions, NEAR_CORPUS)
               for line in path.open(encoding="utf-8") if line.strip()]
    followups = [json.loads(line) for path in FOLLOWUPS for line in path.open(encoding="utf-8")]
    items = collect(pipeline, natural, load_cases(args.data, args.not_in_corpus), args.cache,
                    followups)
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

    rows = GateRows.of(items, decided)
    trained = rows.label >= 0
    is_natural = np.isin(rows.kinds[trained], ("answerable", "near_miss"))
    print("\ngate signals, ROC AUC alone (out-of-fold selection): all cases that reach the gate;"
          " natural questions only (a right answer vs a wrong one or a near-miss)")
    for j, name in enumerate(FEATURES):
        x, y = rows.x[trained, j], rows.label[trained]
        aucs = [roc_auc_score(y[m], x[m]) for m in (slice(None), is_natural)]
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
    selector.write(selection_module.MODEL_PATH, **fitted_for, fitted_on=(
        f"{sum(it.labels is not None for it in items)} answerable training questions "
        f"({', '.join(str(p.name) for p in args.questions)}), encoder {pipeline.encoder.name}"))
    picks = {kind: fit_pick([(items[i], decided[i]) for i in decided if items[i].lang in group
                             and "reader_scores" in decided[i]])
             for kind, group in READER_GROUPS.items()} if read is not None else None
    if read is None:
        rows.reader_x[:] = np.nan  # --no-reader: no reader models
    gate, _ = fit_gate(rows, trained, args.folds, args.target, args.screen_band,
                       natural_totals(items), off_totals_of(items), picks, read_k or 0, {
        **fitted_for,
        "fitted_on": f"{int(trained.sum())} cases clearing the floor (training "
        f"questions + dataset queries + off-corpus), out-of-fold selection, encoder "
        f"{pipeline.encoder.name}",
        "cv": f"GroupKFold({args.folds}) by query_id; thresholds keep each scope's target of "
        "right natural answers on inner out-of-fold probabilities, the target "
        + ("chosen by choose_target (bounds: WRONG_BOUND, NEAR_MISS_BOUND)" if args.target is None
           else f"{args.target} (--target)") + "; hedge thresholds by choose_hedge (a hedged "
        f"band holds the fact for >= {HEDGE_PRECISION} of its natural questions and dataset "
        f"not-in-corpus queries, off-corpus answered <= {OFF_CORPUS_BOUND})"})
    gate.write()  # reads it back (GateModels.load)
    print(f"\nwritten {selection_module.MODEL_PATH} and {MODEL_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
