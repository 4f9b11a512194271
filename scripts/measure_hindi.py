"""Hindi found as people ask it (issue 42, item 2): each lever on and off, per question style.

    python scripts/measure_hindi.py --index <index> [--variants NAME ...]
        [--json docs/hindi_levers.json] [--plot docs/img/hindi_levers.png]
        [--delivered baseline "lexicon + leading"] [--shortlist "lexicon + leading"]

Questions: the Hindi training questions (``eval/training/hi_*.jsonl``: answerable ones with their
verbatim span, near-misses), styles typed, spoken, code_mixed, latin, and the shared sample's
Hindi off-corpus questions (``offcorpus.jsonl``). The test set is never read. Each question is
read and searched as the pipeline does (``Pipeline.prepare``: language auto-detected, fillers,
hybrid retrieval per ``rag/fusion.json``), with the levers of a variant (:data:`VARIANTS`) on:

- ``lexicon``: Latin-letter Hindi read with the corpus lexicon (``rag/lexicon.py``) after the
  hand list; ``leading``: leading spoken fillers ("अच्छा", "मतलब", "हां") removed;
  ``both_scripts``: BM25 over the Devanagari spelling of a question's Latin words too;
- ``stem``: BM25 terms of Hindi passages and questions stemmed (Snowball's Hindi stemmer,
  PyStemmer: ``pip install PyStemmer``, not a project dependency), a BM25 index built here over
  the same passages;
- ``english``: BM25 over the English passages with the question's English words (its Latin
  words, and the English spelling of its Devanagari loanwords), each English passage's score
  given to its Hindi sibling beside the Hindi BM25.

Per style it prints, over answerable questions: the floor refuses (%), a passage holding the
span among the top 5 hits read in Hindi (%), the span in the shipped selector's top 4
candidates with the floor passed (%: what the reader reads), and in its top k for larger k
(the shortlist lever); over near-misses and off-corpus questions the share that clears the
floor. The selector is the shipped one (``rag/selector_model.json``, fitted on these questions:
in-sample, the same for every variant). ``--shortlist VARIANT`` has the student reader read the
selector's top k (:data:`SHORTLIST_KS`) and re-pick (:func:`shortlist`; ~40 min on 2 busy
cores); ``--delivered VARIANT ...`` runs the whole pipeline (the shipped gate and readers, not
refitted; ~20 min a variant): the share whose confident or hedged text holds the span.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag.language import read_language  # noqa: E402
from rag.lexicon import HindiLexicon, load_lexicon  # noqa: E402
from rag.pipeline import Pipeline  # noqa: E402
from rag.retrieval import fuse, retrieve  # noqa: E402
from rag.romanized import LEXICON  # noqa: E402
from rag.selection import AnswerSelector  # noqa: E402
from rag.settings import SHARED_SAMPLE, RagSettings  # noqa: E402
from rag.sparse import K1, B, passage_terms  # noqa: E402
from rag.text import tokenize  # noqa: E402
from rag.types import Hit, Status  # noqa: E402

STYLES = ("typed", "spoken", "code_mixed", "latin")
KS = (1, 2, 4, 6, 8, 12, 16)
"""Shortlist sizes reported (the reader reads the selector's top 4: ``reader_top_k``)."""


@dataclass(frozen=True)
class Levers:
    lexicon: bool = False
    leading: bool = False
    both_scripts: bool = False
    stem: bool = False
    english: bool = False
    hindi_words_only: bool = False
    """The lexicon without its loanwords: English words of a Latin-letter question stay Latin."""
    dense_weight: float | None = None
    """The weighted fusion's dense weight for Hindi (None: ``rag/fusion.json``'s)."""


KEPT = dict(lexicon=True, leading=True)
VARIANTS: dict[str, Levers] = {
    "baseline": Levers(),
    "lexicon": Levers(lexicon=True),
    "leading fillers": Levers(leading=True),
    "both scripts": Levers(both_scripts=True),
    "lexicon + both scripts": Levers(lexicon=True, both_scripts=True),
    "stemmer": Levers(stem=True),
    "english siblings": Levers(english=True),
    "lexicon + leading": Levers(**KEPT),
    "lexicon (Hindi words only) + leading": Levers(**KEPT, hindi_words_only=True),
    "+ english": Levers(**KEPT, english=True),
    "+ stemmer": Levers(**KEPT, stem=True),
    "+ both scripts": Levers(**KEPT, both_scripts=True),
    "+ all three": Levers(**KEPT, english=True, stem=True, both_scripts=True),
    "+ all three, dense 0.8": Levers(**KEPT, english=True, stem=True, both_scripts=True,
                                     dense_weight=0.8),
    "+ all three, dense 0.7": Levers(**KEPT, english=True, stem=True, both_scripts=True,
                                     dense_weight=0.7),
    "lexicon + leading, dense 0.8": Levers(**KEPT, dense_weight=0.8),
}


@dataclass
class Question:
    text: str
    style: str
    kind: str
    answer: str = ""


def load_questions(data: Path) -> list[Question]:
    """The Hindi training questions and the sample's Hindi off-corpus questions."""
    out = []
    for path in sorted((ROOT / "eval" / "training").glob("hi_*.jsonl")):
        for line in path.open(encoding="utf-8"):
            if line.strip():
                r = json.loads(line)
                out.append(Question(r["question"], r["style"], r["kind"], r.get("answer", "")))
    for line in (data / "offcorpus.jsonl").open(encoding="utf-8"):
        r = json.loads(line)
        if r["lang"] == "hi":
            out.append(Question(r["text"], "off_corpus", "off_corpus"))
    return out


# ---- the levers measured and not taken: here only, so their figures can be reproduced

def stem_terms(terms: list[str]) -> list[str]:
    """``terms`` with each Devanagari word stemmed by Snowball's Hindi stemmer (PyStemmer,
    ``pip install PyStemmer``: "कीमतें" -> "कीमत", "किताबों" -> "किताब")."""
    import Stemmer

    stem = Stemmer.Stemmer("hindi").stemWord
    return [stem(t) if "\u0900" <= t[0] <= "\u097f" else t for t in terms]


def devanagari_terms(asked: str, lexicon: HindiLexicon) -> list[str]:
    """The Devanagari spellings (:meth:`HindiLexicon.devanagari`) of the Latin words of a
    question: "Mexico में masa ... कौन सा chemical है?" also searches "मेक्सिको", "मासा"."""
    found = (lexicon.devanagari(t) for t in tokenize(asked) if t.isascii() and t.isalpha())
    return passage_terms(" ".join(w for w in found if w), "hi")


def english_evidence(index, sparse: np.ndarray, asked: str, searched: str,
                     lexicon: HindiLexicon) -> np.ndarray:
    """Hindi BM25 scores ``sparse`` (float32 (n_passages,)) with the English siblings' BM25 of
    the question's English words beside them: its Latin words (not Hindi in Latin letters,
    :data:`rag.romanized.LEXICON`) and the English spelling of its Devanagari loanwords
    (:meth:`HindiLexicon.latin`); each English passage's score goes to its Hindi sibling, both
    scaled to their maximum and added."""
    words = [t for t in tokenize(asked) if t.isascii() and t.isalpha() and t not in LEXICON]
    words += [e for t in tokenize(searched) if (e := lexicon.latin(t))]
    english = index.sparse_scores(passage_terms(" ".join(words), "en"), "en") if words else None
    if english is None or not english.any():
        return sparse
    moved = np.zeros_like(sparse)
    for label in np.flatnonzero(english):
        sibling = index.label_of(index.passages[label].sibling_id("hi"))
        if sibling is not None:
            moved[sibling] = max(moved[sibling], english[label])
    if not moved.any():
        return sparse
    top = float(sparse.max())
    return ((sparse / top if top > 0 else sparse) + moved / moved.max()).astype(np.float32)


class StemmedBM25:
    """BM25 (bm25s, the index's parameters: ``rag.sparse.K1``, ``B``) over the index's
    passages with :func:`stem_terms` applied to their terms, built in memory (~10 s)."""

    def __init__(self, passages) -> None:
        import bm25s

        self.retriever = bm25s.BM25(k1=K1, b=B)
        self.retriever.index([stem_terms(passage_terms(p.text, p.lang)) or [""]
                              for p in passages], show_progress=False)
        self.n = len(passages)

    def scores(self, terms: list[str]) -> np.ndarray:
        known = [t for t in stem_terms(terms) if t in self.retriever.vocab_dict]
        if not known:
            return np.zeros(self.n, dtype=np.float32)
        return np.asarray(self.retriever.get_scores(known), dtype=np.float32)


class Searcher:
    """The pipeline's language step and search with a variant's levers (see the module)."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.p = pipeline
        self.lexicon = load_lexicon()
        self._stemmed = None

    def read(self, text: str, levers: Levers) -> tuple[str, str]:
        """(language, searched text) as ``Pipeline._language`` reads ``text``."""
        lexicon = HindiLexicon()
        if levers.lexicon:
            lexicon = HindiLexicon(self.lexicon.native) if levers.hindi_words_only else self.lexicon
        basis = read_language(text, lexicon=lexicon, leading=levers.leading)
        return basis.lang, basis.searched or text

    def terms(self, asked: str, searched: str, levers: Levers) -> list[str]:
        terms = passage_terms(searched, None)
        if levers.both_scripts:
            terms += devanagari_terms(asked, self.lexicon)
        return terms

    def sparse(self, terms: list[str], lang: str, levers: Levers) -> np.ndarray:
        if not levers.stem:
            return self.p.index.sparse_scores(terms, lang)
        if self._stemmed is None:
            self._stemmed = StemmedBM25(self.p.index.passages)
        in_lang = np.array([p.lang == lang for p in self.p.index.passages])
        return np.where(in_lang, self._stemmed.scores(terms), 0.0).astype(np.float32)

    def search(self, text: str, levers: Levers) -> tuple[str, str, np.ndarray, list[Hit], float]:
        lang, searched = self.read(text, levers)
        vector = self.p.encode_query(searched)
        s = self.p.settings
        fusion = self.p.fusion.get(lang)
        if levers.dense_weight is not None and lang == "hi":
            fusion = replace(fusion, dense_weight=levers.dense_weight)
        k = s.top_k
        pool = retrieve(self.p.index, vector, lang, k * s.pool_factor, is_explicit=False,
                        language_bonus=s.language_bonus, pool_factor=1)
        sparse = self.sparse(self.terms(text, searched, levers), lang, levers)
        if levers.english and lang == "hi":
            sparse = english_evidence(self.p.index, sparse, text, searched, self.lexicon)
        hits = fuse(self.p.index, vector, pool, sparse, lang, k, fusion, s.language_bonus)
        return lang, searched, vector, hits, (pool[0].score if pool else None)


def measure(searcher: Searcher, selector: AnswerSelector, questions: list[Question],
            levers: Levers) -> dict[str, dict[str, float]]:
    """Per style: n and the shares (0-1) the module lists."""
    p = searcher.p
    counts: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for q in questions:
        lang, searched, _, hits, top = searcher.search(q.text, levers)
        passed = top is not None and top >= p.settings.floor(lang)
        for style in (q.style, "all") if q.kind == "answerable" else (q.kind,):
            c = counts[style]
            c["n"] += 1
            c["floor_passed"] += passed
        if q.kind != "answerable":
            continue
        top5 = any(q.answer in p.in_language(h, "hi").text for h in hits[:5])
        ranked = selector.select(searched, lang, hits, lambda h, lang=lang: p.in_language(h, lang),
                                 p.answers.idf)
        ranked = ranked.ranked if ranked else ()
        first = next((i for i, c in enumerate(ranked) if q.answer in c.text), None)
        for style in (q.style, "all"):
            c = counts[style]
            c["top5"] += top5
            for k in KS:
                c[f"span@{k}"] += passed and first is not None and first < k
            c["span@all"] += passed and first is not None
            c["candidates"] += len(ranked)
    return {style: {"n": c["n"], **{k: v / c["n"] for k, v in c.items() if k != "n"}}
            for style, c in counts.items()}


def delivered(pipeline: Pipeline, questions: list[Question], levers: Levers,
              lexicon: HindiLexicon) -> dict[str, dict[str, float]]:
    """Per style (and near-misses, off-corpus questions): the whole pipeline
    (``Pipeline.ask``: the shipped selector, student reader and gate, not refitted) with
    ``levers``' reading of the question (``lexicon``, ``leading``; the BM25 levers are not
    wired into the pipeline): ``delivered``, the share of answerable questions whose confident
    or hedged answer holds the span; ``confident``, ``confident_wrong`` (without the span);
    ``answered``, either way (for near-misses, also per style: ``near_miss:<style>``)."""
    import rag.answer.signals as signals
    import rag.pipeline as pipeline_module

    lexicon = lexicon if levers.lexicon else HindiLexicon()
    # the language stage and the gate's question_style read the question the variant's way
    patched = ((pipeline_module, "read_language", functools.partial(
                    read_language, lexicon=lexicon, leading=levers.leading)),
               (signals, "to_devanagari", functools.partial(signals.to_devanagari,
                                                            lexicon=lexicon)),
               (signals, "strip_fillers", functools.partial(signals.strip_fillers,
                                                            leading=levers.leading)))
    saved = [(module, name, getattr(module, name)) for module, name, _ in patched]
    for module, name, value in patched:
        setattr(module, name, value)
    counts: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    try:
        for q in questions:
            result = pipeline.ask(q.text)
            answered = result.status in (Status.ANSWERED, Status.HEDGED)
            holds = answered and q.answer and q.answer in (result.answer or "")
            keys = (q.style, "all") if q.kind == "answerable" else (q.kind, f"{q.kind}:{q.style}")
            for style in dict.fromkeys(keys):
                c = counts[style]
                c["n"] += 1
                c["delivered"] += bool(holds)
                c["confident"] += result.status == Status.ANSWERED
                c["confident_wrong"] += result.status == Status.ANSWERED and not holds
                c["answered"] += answered
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
    return {style: {"n": c["n"], **{k: v / c["n"] for k, v in c.items() if k != "n"}}
            for style, c in counts.items()}


SHORTLIST_KS = (4, 6, 8, 12)


def diversified(ranked: list) -> list:
    """The selector's candidates re-ordered so the best sentence of each passage comes first
    (in the selector's order of those), then the second-best of each, and so on."""
    seen: dict[str, int] = {}
    keyed = []
    for i, c in enumerate(ranked):
        n = seen.get(c.source.id, 0)
        seen[c.source.id] = n + 1
        keyed.append((n, i, c))
    return [c for _, _, c in sorted(keyed, key=lambda t: (t[0], t[1]))]


def shortlist(searcher: Searcher, selector: AnswerSelector, questions: list[Question],
              levers: Levers) -> dict[str, dict]:
    """For answerable questions that clear the floor: per style and k of
    :data:`SHORTLIST_KS`, the span among the selector's top k (``span``), among the top k of
    :func:`diversified` (``diverse``), and the pick holding it when the student reads the top
    k and re-picks with the shipped Hindi pick weights (``pick``); and the student's time
    (ms, median) to read k candidates."""
    from rag.answer import GateModels, load_readers
    from rag.answer.gate import pick_order

    p = searcher.p
    reader = load_readers(["hi"], tokenizer=getattr(p.encoder, "tokenizer", None))["hi"]
    weights = GateModels.load().pick_weights("hi")
    counts: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    times: dict[int, list[float]] = defaultdict(list)
    for q in questions:
        if q.kind != "answerable":
            continue
        lang, searched, _, hits, top = searcher.search(q.text, levers)
        for style in (q.style, "all"):
            counts[style]["n"] += 1
        if top is None or top < p.settings.floor(lang):
            continue
        selection = selector.select(searched, lang, hits,
                                    lambda h, lang=lang: p.in_language(h, lang), p.answers.idf)
        ranked = list(selection.ranked) if selection else []
        if not ranked:
            continue
        texts = [c.text for c in ranked[:max(SHORTLIST_KS)]]
        diverse = diversified(ranked)
        for k in SHORTLIST_KS:
            t0 = time.perf_counter()  # one call per k: int8 scores depend on the batch read
            scores = [float(x) for x in reader.score(searched, texts[:k])]
            times[k].append(1000 * (time.perf_counter() - t0))
            pick = pick_order([c.probability for c in ranked[:k]], scores, weights)[0]
            for style in (q.style, "all"):
                c = counts[style]
                c[f"span@{k}"] += any(q.answer in x.text for x in ranked[:k])
                c[f"diverse@{k}"] += any(q.answer in x.text for x in diverse[:k])
                c[f"pick@{k}"] += q.answer in ranked[pick].text
    out = {style: {"n": c["n"], **{k: v / c["n"] for k, v in c.items() if k != "n"}}
           for style, c in counts.items()}
    out["reader_ms"] = {str(k): float(np.median(v)) for k, v in times.items()}
    return out


ROWS: tuple[tuple[str, str], ...] = (
    ("floor_refused", "floor refuses"),
    ("top5", "passage with the span in the top 5"),
    ("span@4", "span in the selector's top 4 (read)"),
    ("span@8", "span in its top 8"),
)


def print_table(results: dict[str, dict[str, dict[str, float]]]) -> None:
    styles = [*STYLES, "all"]
    first = next(iter(results.values()))
    print(f"{'n':<38}" + "".join(f"{int(first[s]['n']):>12}" for s in styles)
          + "".join(f"{int(first[s]['n']):>12}" for s in ("near_miss", "off_corpus")))
    for key, label in ROWS:
        print(f"\n{label} (% of answerable; near-miss / off-corpus: cleared the floor)")
        print(f"{'variant':<38}" + "".join(f"{s:>12}" for s in styles)
              + f"{'near_miss':>12}{'off_corpus':>12}")
        for name, res in results.items():
            cells = "".join(f"{100 * res[s][key]:>11.1f}%" for s in styles)
            cells += "".join(f"{100 * res[s]['floor_passed']:>11.1f}%"
                             for s in ("near_miss", "off_corpus") if s in res)
            print(f"{name:<38}{cells}")


def with_refused(res: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    return {s: {**v, "floor_refused": 1 - v["floor_passed"]} for s, v in res.items()}


PLOTTED = ("baseline", "lexicon", "leading fillers", "both scripts", "stemmer",
           "english siblings", "lexicon + leading", "+ all three")
"""The variants drawn (every variant is in the printed table and the JSON)."""


def plot(results: dict, out: Path) -> None:
    """``out`` (PNG): per style, the :data:`PLOTTED` variants' shares of :data:`ROWS` but the
    last as grouped bars; with a shortlist, a last panel of the span in the selector's top k
    and the re-pick holding it when the student reads them, against k."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = ROWS[:3]
    names = [n for n in PLOTTED if n in results]
    panels = len(rows) + ("shortlist" in results)
    fig, axes = plt.subplots(1, panels, figsize=(4.6 * panels, 4.6))
    width = 0.8 / len(names)
    x = np.arange(len(STYLES) + 1)
    for ax, (key, label) in zip(axes, rows, strict=False):
        for j, name in enumerate(names):
            ax.bar(x + j * width - 0.4 + width / 2,
                   [100 * results[name][s][key] for s in (*STYLES, "all")], width, label=name)
        ax.set_xticks(x, [*STYLES, "all"], rotation=20)
        ax.set_title(label, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        if key != "floor_refused":  # shares near the top: the differences, not the whole bar
            low = min(100 * results[n][s][key] for n in names for s in (*STYLES, "all"))
            ax.set_ylim(max(0, 10 * (low // 10) - 10), 100)
    axes[0].set_ylabel("% of answerable Hindi training questions")
    axes[0].legend(fontsize=7)
    if "shortlist" in results:
        ax, short = axes[-1], results["shortlist"]
        for style, color in zip((*STYLES, "all"), plt.rcParams["axes.prop_cycle"].by_key()
                                ["color"], strict=False):
            ax.plot(SHORTLIST_KS, [100 * short[style][f"span@{k}"] for k in SHORTLIST_KS],
                    "o-", color=color, label=f"{style}: span in top k")
            ax.plot(SHORTLIST_KS, [100 * short[style][f"pick@{k}"] for k in SHORTLIST_KS],
                    "s--", color=color, label=f"{style}: re-pick holds it")
        ax.set_xticks(SHORTLIST_KS, [f"{k}\n{short['reader_ms'][str(k)]:.0f} ms"
                                     for k in SHORTLIST_KS])
        ax.set_xlabel("candidates the student reads (k), its median time")
        ax.set_title("the shortlist (lexicon + leading)", fontsize=9)
        ax.legend(fontsize=6)
        ax.grid(alpha=0.3)
    fig.suptitle("Hindi levers per question style, training questions "
                 "(scripts/measure_hindi.py)", fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", type=Path, default=RagSettings.from_env().index_dir)
    parser.add_argument("--data", type=Path, default=SHARED_SAMPLE.parent)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--delivered", nargs="*", default=[],
                        help="variants run through the whole pipeline (slow: the reader)")
    parser.add_argument("--shortlist", help="a variant whose top-k candidates the student "
                        "reads (the shortlist lever)")
    parser.add_argument("--shortlist-from", type=Path,
                        help="the shortlist figures of an earlier run (its JSON's 'shortlist')")
    args = parser.parse_args(argv)
    settings = replace(RagSettings.from_env(), index_dir=args.index, use_gate=False)
    pipeline = Pipeline.from_settings(settings)
    searcher = Searcher(pipeline)
    selector = AnswerSelector.load()
    questions = load_questions(args.data)
    results = {}
    for name in args.variants:
        t0 = time.perf_counter()
        results[name] = with_refused(measure(searcher, selector, questions, VARIANTS[name]))
        print(f"{name}: {time.perf_counter() - t0:.0f} s", flush=True)
    if results:
        print_table(results)
    if args.shortlist:
        short = shortlist(searcher, selector, questions, VARIANTS[args.shortlist])
        print(f"\nshortlist ({args.shortlist}): % of answerable, floor passed; student ms")
        print(json.dumps(short, indent=1))
        results["shortlist"] = short
    elif args.shortlist_from:
        loaded = json.loads(args.shortlist_from.read_text(encoding="utf-8"))
        results["shortlist"] = loaded.get("shortlist", loaded)
    if args.delivered:
        full = Pipeline.from_settings(replace(settings, use_gate=True))
        for name in args.delivered:
            t0 = time.perf_counter()
            results.setdefault("delivered", {})[name] = delivered(
                full, questions, VARIANTS[name], searcher.lexicon)
            print(f"delivered, {name}: {time.perf_counter() - t0:.0f} s", flush=True)
        print(json.dumps(results["delivered"], indent=1))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    if args.plot:
        plot(results, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
