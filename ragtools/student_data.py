"""Training pairs for the multilingual student reader (issue 32, step 1): questions and candidate
sentences in en/hi/gu/te, each scored by the English teacher (``rag/reader.py``'s cross-encoder)
on its English version, and labelled where the answer span is known.

Sources (nothing the test set uses: the topics of its en/hi questions, the passages of its gu/te
ones, :func:`held_back_for_the_test_set`):

- the training questions (``eval/training/*.jsonl``) and their translations
  (``eval/training/parallel/``, tied to the original by ``source_id``): an English question
  and its Hindi version share one topic (``query_id``);
- the shared sample's dataset queries with ``eng_query`` whose passages are in the corpus;
- XQuAD en/hi (``../shared/data/qa/``): 1,190 question pairs over 240 parallel paragraphs.

Candidates are the sentences (:func:`rag.selection.sentences_of`, as the selector sees them) of
the question's topic: the passages of its ``query_id`` (an XQuAD paragraph for XQuAD); a
training record keeps only its answer sentences, the nearest by e5 and a few at random
(:func:`narrowed`), a held-out one all. A Hindi sentence gets its English sibling's teacher
score when the two are aligned: the same passage index, sentence positions at most one apart,
and each the other's best match by e5-small's cross-lingual cosine (mutual best; a sentence
without such a sibling is not distilled).

What the student never trains on (:func:`split_of`): the questions first written in hi, gu or
te, with their translations, and the dataset queries (the answerability gate is fitted on
those, out of fold: their reader scores must be out of sample; they are the held-out measure of
the student's Hindi, Gujarati and Telugu), and every question of a held-out share of topics. So
the student learns Hindi from the Hindi translations of the English training questions and
XQuAD, and Gujarati and Telugu only through e5's shared vocabulary (the
sample's gu/te passages have no English siblings for the teacher to score).

Output (``build_pairs``): one JSON line per question,
``{"group", "origin", "split", "questions": {lang: text}, "kind", "sentences": [{lang: text}],
"teacher": [logit | null], "label": [0 | 1 | null]}``: ``group`` names the topic, ``origin`` the
question's first language (or ``dataset``, ``xquad``), ``split`` ``train`` or ``held_out``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import random
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from rag.corpus import read_passages
from rag.selection import sentences_of
from rag.settings import PROJECT_ROOT, SHARED_SAMPLE

log = logging.getLogger(__name__)

QA_DIR = PROJECT_ROOT.parent / "shared" / "data" / "qa"
QUERIES = SHARED_SAMPLE.with_name("queries.jsonl")
TRAINING = PROJECT_ROOT / "eval" / "training"
TEST_SET = PROJECT_ROOT / "eval" / "natural_questions.jsonl"
HELD_OUT_SHARE = 0.15
"""Share of topics held out of training (by a hash of the topic name): the student's agreement
with the teacher and its top-1 are measured on them."""
MAX_ALIGN_SHIFT = 1
"""Sentence positions an aligned Hindi/English pair may differ by (a translation that split or
joined a sentence shifts the rest by one)."""
NEAREST_PER_QUESTION = 10
RANDOM_PER_QUESTION = 4
"""Candidates kept per training question besides its answer sentences: the nearest by e5's
cosine to the question (the hard ones, as retrieval would bring them) and a few at random; the
teacher scores only these (all of a topic's ~40 sentences would take it an hour on 2 cores)."""
HELD_OUT_TEACHER_EVERY = 4
"""Of the held-out questions, the teacher scores every fourth (its agreement with the student is
measured on those; the top-1 comparisons need only the span labels)."""


def split_of(record: dict) -> str:
    """``held_out`` for the records the student never trains on: every question first written
    in hi, gu or te and every dataset query (``origin``; the answerability gate is fitted on
    those, so their reader scores must be out of sample) and every question of a held-out
    topic (a stable :data:`HELD_OUT_SHARE` of topics, by a hash of the topic); else
    ``train``."""
    digest = hashlib.sha256(record["group"].encode("utf-8")).digest()
    if record["origin"] in ("hi", "gu", "te", "dataset") or digest[0] / 256 < HELD_OUT_SHARE:
        return "held_out"
    return "train"


def _read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def held_back_for_the_test_set() -> tuple[set[int], set[str]]:
    """What the test set uses, never trained on: the topics (``query_id``) of its en and hi
    questions, and the passages of its gu and te questions (gu/te training questions share
    topics with them, on other passages of the topic: ``eval/README.md``)."""
    rows = _read_jsonl(TEST_SET)
    topics = {int(r["query_id"]) for r in rows if r["lang"] in ("en", "hi") and r.get("query_id")}
    passages = {r["passage_id"] for r in rows if r["lang"] in ("gu", "te") and r.get("passage_id")}
    return topics, passages


def cached_vectors(encoder, texts: list[str], cache: Path | None, is_query: bool = False
                   ) -> np.ndarray:
    """e5 vectors of ``texts`` (unit, float32), kept in ``cache`` (an .npy file named by a hash
    of the texts) so a second build does not encode them again."""
    if cache is not None:
        digest = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:16]
        path = cache / f"vectors-{'q' if is_query else 'p'}-{digest}.npy"
        if path.exists():
            return np.load(path)
    vectors = encoder.encode_queries(texts) if is_query else encoder.encode_passages(texts)
    vectors = np.asarray(vectors, dtype=np.float32)
    if cache is not None:
        np.save(path, vectors)
    return vectors


def mutual_alignment(en_vectors: np.ndarray, hi_vectors: np.ndarray) -> dict[int, int]:
    """Hindi sentence index -> English sentence index, for the pairs that are each the other's
    best by cosine (unit vectors, shapes (n_en, d) and (n_hi, d)) and at most
    :data:`MAX_ALIGN_SHIFT` positions apart."""
    if not len(en_vectors) or not len(hi_vectors):
        return {}
    cos = hi_vectors @ en_vectors.T
    best_en, best_hi = cos.argmax(axis=1), cos.argmax(axis=0)
    return {j: int(k) for j, k in enumerate(best_en)
            if best_hi[k] == j and abs(int(k) - j) <= MAX_ALIGN_SHIFT}


class Topics:
    """The sentences of every passage of the sample, by language and passage id, with the
    English sibling of each aligned Hindi sentence."""

    def __init__(self, encoder, cache: Path | None = None) -> None:
        self.sentences: dict[str, list[str]] = {}
        self.by_query: dict[tuple[str, int], list[str]] = defaultdict(list)
        for passage in read_passages(SHARED_SAMPLE):
            self.sentences[passage.id] = sentences_of(passage.text)
            self.by_query[(passage.lang, passage.query_id)].append(passage.id)
        self.sibling: dict[tuple[str, int], tuple[str, int]] = {}
        pairs = [(pid, "en" + pid[2:]) for pid in self.sentences
                 if pid.startswith("hi-") and "en" + pid[2:] in self.sentences]
        texts = [s for hi, en in pairs for s in self.sentences[hi] + self.sentences[en]]
        start = time.monotonic()
        vectors = cached_vectors(encoder, texts, cache)
        self.vector: dict[str, np.ndarray] = {}
        at = 0
        for hi, en in pairs:
            n_hi, n_en = len(self.sentences[hi]), len(self.sentences[en])
            hi_v, en_v = vectors[at:at + n_hi], vectors[at + n_hi:at + n_hi + n_en]
            at += n_hi + n_en
            for k, text in enumerate(self.sentences[en]):
                self.vector[text] = en_v[k]
            for j, text in enumerate(self.sentences[hi]):
                self.vector[text] = hi_v[j]
            for j, k in mutual_alignment(en_v, hi_v).items():
                self.sibling[(hi, j)] = (en, k)
        n_hi_sentences = sum(len(self.sentences[hi]) for hi, _ in pairs)
        log.info("aligned %d of %d Hindi sentences to English (%.0f s)", len(self.sibling),
                 n_hi_sentences, time.monotonic() - start)

    def candidates(self, query_id: int, skip: set[str] = frozenset()) -> list[dict[str, str]]:
        """The topic's sentences as ``{lang: text}``: every English sentence with its aligned
        Hindi sibling if any, then the Hindi sentences without one, then gu/te sentences; none
        of the passages in ``skip``."""
        out: list[dict[str, str]] = []
        hi_of = {en_at: hi_at for hi_at, en_at in self.sibling.items()}
        for pid in self.by_query.get(("en", query_id), []):
            for k, text in enumerate(self.sentences[pid]):
                row = {"en": text}
                if (pid, k) in hi_of:
                    hi, j = hi_of[(pid, k)]
                    row["hi"] = self.sentences[hi][j]
                out.append(row)
        for lang in ("hi", "gu", "te"):
            for pid in self.by_query.get((lang, query_id), []):
                if pid in skip:
                    continue
                for j, text in enumerate(self.sentences[pid]):
                    if lang != "hi" or (pid, j) not in self.sibling:
                        out.append({lang: text})
        return out


def holds(sentence: str, answer: str) -> bool:
    """Whether ``sentence`` holds the answer span (verbatim, as ``scripts/fit_answering.py``
    labels candidates)."""
    return bool(answer) and answer in sentence


def training_questions(skip: set[int]) -> list[dict]:
    """Training questions merged with their translations: ``{"questions": {lang: text},
    "query_id", "kind", "answers": {lang: span}}`` (one entry per original question)."""
    rows = [r for path in sorted(TRAINING.glob("*.jsonl")) for r in _read_jsonl(path)]
    by_id = {r["id"]: {"questions": {r["lang"]: r["question"]}, "query_id": r["query_id"],
                       "kind": r["kind"], "answers": {r["lang"]: r.get("answer", "")},
                       "origin": r["lang"]}
             for r in rows}
    for path in sorted((TRAINING / "parallel").glob("*.jsonl")):
        for r in _read_jsonl(path):
            source = by_id.get(r.get("source_id"))
            if source is None or r["lang"] in source["questions"]:
                continue
            source["questions"][r["lang"]] = r["question"]
            source["answers"][r["lang"]] = r.get("answer", "")
    return [q for q in by_id.values() if int(q["query_id"]) not in skip]


def dataset_queries(skip: set[int]) -> list[dict]:
    """The sample's Hindi dataset queries (with ``eng_query``) whose passages are in the corpus,
    and the English queries with no Hindi row."""
    out: dict[int, dict] = {}
    for r in _read_jsonl(QUERIES):
        if not r.get("has_passages_in_corpus") or int(r["query_id"]) in skip:
            continue
        entry = out.setdefault(int(r["query_id"]), {"questions": {}, "query_id": r["query_id"],
                                                    "kind": "dataset", "answers": {},
                                                    "origin": "dataset"})
        entry["questions"][r["lang"]] = r["text"]
        if r.get("eng_query"):
            entry["questions"].setdefault("en", r["eng_query"])
    return list(out.values())


def xquad_items() -> Iterable[dict]:
    """XQuAD en/hi question pairs with their paragraphs' sentences (aligned later)."""
    books = {lang: json.loads((QA_DIR / f"xquad.{lang}.json").read_text(encoding="utf-8"))
             for lang in ("en", "hi")}
    for art_en, art_hi in zip(books["en"]["data"], books["hi"]["data"], strict=True):
        for p, (par_en, par_hi) in enumerate(zip(art_en["paragraphs"], art_hi["paragraphs"],
                                                 strict=True)):
            group = f"xquad:{art_en['title']}:{p}"
            for qa_en, qa_hi in zip(par_en["qas"], par_hi["qas"], strict=True):
                yield {"group": group, "context": {"en": par_en["context"],
                                                   "hi": par_hi["context"]},
                       "questions": {"en": qa_en["question"], "hi": qa_hi["question"]},
                       "answers": {"en": qa_en["answers"][0]["text"],
                                   "hi": qa_hi["answers"][0]["text"]}}


def _labels(sentences: list[dict[str, str]], answers: dict[str, str], kind: str
            ) -> list[int | None]:
    if kind == "near_miss":
        return [0] * len(sentences)
    if kind == "dataset" or not any(answers.values()):
        return [None] * len(sentences)
    return [int(any(holds(s[lang], a) for lang, a in answers.items() if lang in s))
            for s in sentences]


def held_out_file(out: Path) -> Path:
    """Where :func:`build_pairs` writes the held-out records beside the training ones."""
    return out.with_name(f"{out.stem}-held-out{out.suffix}")


def narrowed(record: dict, q_vectors: dict[str, np.ndarray], s_vectors: dict[str, np.ndarray],
             rng: random.Random) -> dict:
    """``record`` with only its answer sentences, the :data:`NEAREST_PER_QUESTION` sentences
    closest to the question (e5 cosine, the best over the question's and the sentence's
    languages) and :data:`RANDOM_PER_QUESTION` others at random, in their order."""
    sentences, labels = record["sentences"], record["label"]
    closeness = [max(float(q_vectors[q] @ s_vectors[t]) for q in record["questions"].values()
                     for t in sentence.values()) for sentence in sentences]
    keep = {i for i, label in enumerate(labels) if label == 1}
    keep |= set(sorted(range(len(sentences)), key=lambda i: -closeness[i])[:NEAREST_PER_QUESTION])
    rest = [i for i in range(len(sentences)) if i not in keep]
    keep |= set(rng.sample(rest, min(RANDOM_PER_QUESTION, len(rest))))
    return {**record, "sentences": [sentences[i] for i in sorted(keep)],
            "label": [labels[i] for i in sorted(keep)]}


def earlier_teacher_scores(out: Path) -> dict[tuple[str, tuple[str, ...]], list[float]]:
    """The teacher's logits by (English question, a record's English sentences) in an earlier
    build's files at ``out`` (none: empty), so a rebuild scores only what is new. By the whole
    batch, as it was scored: int8 activations are quantised per batch, so a sentence scored in
    another batch gets a slightly other logit."""
    known: dict[tuple[str, tuple[str, ...]], list[float]] = {}
    for path in (out, held_out_file(out)):
        if not path.is_file():
            continue
        for record in _read_jsonl(path):
            english = record["questions"].get("en")
            pairs = [(s["en"], t) for s, t in zip(record["sentences"], record["teacher"],
                                                  strict=True) if "en" in s and t is not None]
            if english and pairs:
                known[(english, tuple(s for s, _ in pairs))] = [t for _, t in pairs]
    return known


def build_pairs(out: Path, encoder, teacher) -> dict[str, int]:
    """Write the pairs file (see the module); returns counts by source and split."""
    skip, test_passages = held_back_for_the_test_set()
    cache = out.parent
    topics = Topics(encoder, cache)
    counts: dict[str, int] = defaultdict(int)
    records: list[dict] = []
    for q in training_questions(skip) + dataset_queries(skip):
        group = f"topic:{q['query_id']}"
        sentences = topics.candidates(int(q["query_id"]), test_passages)
        if not sentences:
            continue
        records.append({"group": group, "questions": q["questions"], "kind": q["kind"],
                        "origin": q["origin"], "sentences": sentences,
                        "label": _labels(sentences, q["answers"], q["kind"])})
    xquad = list(xquad_items())
    contexts = {}
    for item in xquad:
        contexts.setdefault(item["group"], item["context"])
    sentence_lists = {g: {lang: sentences_of(c[lang]) for lang in ("en", "hi")}
                      for g, c in contexts.items()}
    texts = [s for g in sentence_lists for lang in ("en", "hi") for s in sentence_lists[g][lang]]
    vectors = cached_vectors(encoder, texts, cache)
    topics.vector.update(zip(texts, vectors, strict=True))
    aligned: dict[str, list[dict[str, str]]] = {}
    at = 0
    for g, by_lang in sentence_lists.items():
        n_en, n_hi = len(by_lang["en"]), len(by_lang["hi"])
        en_v, hi_v = vectors[at:at + n_en], vectors[at + n_en:at + n_en + n_hi]
        at += n_en + n_hi
        pairs = mutual_alignment(en_v, hi_v)
        hi_of = {k: j for j, k in pairs.items()}
        aligned[g] = [{"en": s, **({"hi": by_lang["hi"][hi_of[k]]} if k in hi_of else {})}
                      for k, s in enumerate(by_lang["en"])]
    for item in xquad:
        sentences = aligned[item["group"]]
        records.append({"group": item["group"], "questions": item["questions"],
                        "kind": "answerable", "origin": "xquad", "sentences": sentences,
                        "label": _labels(sentences, item["answers"], "answerable")})
    # encoded in two groups, the records of the gu/te test questions' topics apart (held out):
    # int8 activations are quantised per batch, so a vector depends on its batch, and the
    # training file must not change when held-out records do
    q_vectors: dict[str, np.ndarray] = {}
    gu_te_test_topics = {f"topic:{p.split('-')[1]}" for p in test_passages}
    for is_apart in (False, True):
        chosen = [r for r in records if (r["group"] in gu_te_test_topics) == is_apart]
        questions = sorted({t for r in chosen for t in r["questions"].values()} - set(q_vectors))
        q_vectors.update(zip(questions, cached_vectors(encoder, questions, cache, is_query=True),
                             strict=True))
        missing = sorted({t for r in chosen for s in r["sentences"] for t in s.values()
                          if t not in topics.vector})
        topics.vector.update(zip(missing, cached_vectors(encoder, missing, cache), strict=True))
    known = earlier_teacher_scores(out)
    start = time.monotonic()
    n_scored = 0
    for record in records:
        record["split"] = split_of(record)
    for split in ("train", "held_out"):
        chosen = [r for r in records if r["split"] == split]
        with held_out_file(out).open("w", encoding="utf-8") if split == "held_out" else \
                out.open("w", encoding="utf-8") as handle:
            for n, record in enumerate(chosen):
                if split == "train":
                    record = narrowed(record, q_vectors, topics.vector, random.Random(n))
                english = record["questions"].get("en")
                en_rows = [i for i, s in enumerate(record["sentences"]) if "en" in s]
                teacher_scores: list[float | None] = [None] * len(record["sentences"])
                if english and en_rows and (split == "train" or n % HELD_OUT_TEACHER_EVERY == 0):
                    texts = tuple(record["sentences"][i]["en"] for i in en_rows)
                    if (english, texts) not in known:  # a record's sentences in one batch
                        known[(english, texts)] = [round(float(logit), 3) for logit in
                                                   teacher.score(english, list(texts))]
                        n_scored += len(texts)
                    for i, logit in zip(en_rows, known[(english, texts)], strict=True):
                        teacher_scores[i] = logit
                record["teacher"] = teacher_scores
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                counts[f"{record['origin']}/{split}"] += 1
                if n % 500 == 0:
                    log.info("teacher: %s %d of %d questions, %d pairs (%.0f s)", split, n,
                             len(chosen), n_scored, time.monotonic() - start)
        log.info("%s written: %d questions", split, len(chosen))
    log.info("teacher scored %d pairs in %.0f s", n_scored, time.monotonic() - start)
    counts["teacher_pairs"] = n_scored
    counts["aligned_hi_sentences"] = len(topics.sibling)
    return dict(counts)


def main(argv: list[str] | None = None) -> int:
    from rag.encoders import load_encoder
    from rag.reader import load_reader
    from rag.settings import RagSettings

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the pairs JSONL to write")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    encoder = load_encoder(RagSettings().encoder)
    counts = build_pairs(args.out, encoder, load_reader())
    print(json.dumps(counts, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
