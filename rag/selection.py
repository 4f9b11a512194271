"""Answer selection across the retrieved passages: which sentence states what was asked.

The top passage is often not the one that states the fact, and its best-covered sentence often
restates the question instead of answering it. So every sentence of the top ``k`` hits is a
candidate, each read in the query's language (the hit itself, or its sibling translation when
the hit is in another language and the sibling is in the corpus), and a small logistic model
scores how likely the candidate states the answer from cheap signals (:data:`FEATURES`): the
hit's cosine and rank, IDF-weighted coverage of the question's content words by the sentence and
by the one after it (a sentence that restates the question is often followed by the answer),
what the sentence adds beyond the question, whether it carries the kind of fact asked for (a
number for "how much", a year or month for "when", a definitional "X is a …" for "what is"), its
position and length.

The model (``rag/selector_model.json``) is fitted by ``scripts/fit_answering.py`` on the
project's training questions (``eval/training``: a candidate is positive when it contains the
verbatim answer span), cross-validated by query_id; it costs a
few set look-ups and one matrix-vector product per question (its time: docs/benchmarks.md,
"Latency of the core pipeline").
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from rag.fitted import read_model_file
from rag.text import (
    STOPWORDS,
    TokenMatcher,
    content_tokens,
    split_sentences,
    tokenize,
)
from rag.types import Hit, Passage

MODEL_PATH = Path(__file__).with_name("selector_model.json")

MIN_SENTENCE_CHARS = 60
"""A sentence shorter than this (a heading, "Yes.", a list fragment) is joined with the next one,
so a bare heading is never the whole answer (kept from the earlier top-passage extractor)."""

DANDAS = ("\u0964", "\u0965")
"""The danda and double danda: they end a Hindi sentence, as "." ends an English one."""

MAX_ANSWER_CHARS = 300
"""Longest answer text shown (issue #9: the answer stays an answer, at most two sentences and
300 characters; the citations carry the rest of the passage)."""

class SelectionFeatures(NamedTuple):
    """The signals of one candidate sentence, in the order of the fitted model's coefficients
    (``features`` in ``rag/selector_model.json``; scripts/fit_answering.py prints what each
    earns out of fold). Shares are 0-1, flags 0.0/1.0; "weighted" shares weight the question's
    content words by :class:`Idf`."""

    hit_score: float
    """Cosine of the retrieved passage the sentence stands for ([-1, 1])."""
    hit_gap: float
    """Top hit's cosine minus this hit's (>= 0)."""
    hit_rank: float
    """The hit's rank, 0-based."""
    idf_coverage: float
    """Weighted share of the question's content words in the sentence."""
    coverage: float
    """Unweighted share of them (:func:`rag.text.coverage`)."""
    passage_idf_coverage: float
    """Weighted share of them in the whole passage read."""
    novel_share: float
    """Share of the sentence's distinct content words that are not the question's."""
    log_chars: float
    """ln(characters of the sentence + 1)."""
    is_first: float
    """1.0 for the passage's first sentence."""
    position: float
    """Sentence index / (sentences in the passage - 1): 0 first, 1 last."""
    asks_number_has: float
    """The question asks for a number and the sentence has one."""
    asks_number_missing: float
    """The question asks for a number and the sentence has none."""
    asks_date_has: float
    """The question asks for a date and the sentence has a year, month or season."""
    asks_date_missing: float
    """The question asks for a date and the sentence has none."""
    has_number: float
    """The sentence has a digit or a number word."""
    same_language: float
    """The passage read is in the question's language."""
    window_idf_coverage: float
    """Weighted share of the question's content words in this sentence and the one before."""
    bigram_share: float
    """Share of the question's content-word bigrams found in the sentence."""
    trigram_dice: float
    """Dice coefficient of the character trigrams of the sentence's and question's content words."""
    asks_name_has: float
    """The question asks who/where/which and the sentence has a capitalised word not in it."""
    next_idf_coverage: float
    """Weighted share of the question's content words in the next sentence (0 for the last)."""
    asks_definition_has: float
    """The question asks what something is and the sentence reads as a definition."""
    idf_coverage_gap: float
    """``idf_coverage`` minus the best among the question's candidates (<= 0)."""
    window_gap: float
    """``window_idf_coverage`` minus the best among the question's candidates (<= 0)."""
    trigram_gap: float
    """``trigram_dice`` minus the best among the question's candidates (<= 0)."""

    def vector(self) -> np.ndarray:
        """The model's input, float64 (len(FEATURES),) in the order of :data:`FEATURES`."""
        return np.array(self, dtype=np.float64)


FEATURES: tuple[str, ...] = SelectionFeatures._fields
"""The names of :class:`SelectionFeatures`, in the order of the fitted model's coefficients."""

# Question words that ask for a kind of fact, per language (hand-written from the question words
# of MS MARCO queries, their MSMARCO-XI translations and the development set's questions).
_ASKS_NUMBER = re.compile(
    r"\bhow\s+(much|many|long|far|old|big|tall|high|heavy|large|often|fast|deep|wide|hot|cold"
    r"|warm)\b|\b(cost|price|salary|wage|calories|percent|percentage|number\s+of|amount|"
    r"temperature|age|population|dosage|dose)\b"
    r"|कितन[ाीे]|कितनी\s+देर|कीमत|लागत|वेतन|तापमान|उम्र|आयु|संख्या|प्रतिशत"
    r"|કેટલ[ુંાીો]|કિંમત|ખર્ચ|પગાર|તાપમાન|ઉંમર|સંખ્યા"
    r"|ఎంత|ఎన్ని|ధర|ఖర్చు|జీతం|ఉష్ణోగ్రత|వయస్సు|సంఖ్య",
    re.IGNORECASE,
)
_ASKS_DATE = re.compile(
    r"\bwhen\b|\bwhat\s+(year|date|month|day|century|decade)\b|\bwhich\s+(year|month|century)\b"
    r"|\bwhat\s+time\s+of\s+year\b"
    r"|कब\b|कब\s|किस\s+(साल|वर्ष|सन|तारीख|महीने|सदी)|कौन\s+से\s+(साल|वर्ष)"
    r"|ક્યારે|કયા\s+(વર્ષ|વર્ષે|મહિને)|ఎప్పుడు|ఏ\s+(సంవత్సరం|నెల)",
    re.IGNORECASE,
)
_ASKS_NAME = re.compile(
    r"\b(who|whom|whose|where|which|what\s+(is|was|are)\s+the\s+name|called|named)\b",
    re.IGNORECASE,
)
_ASKS_DEFINITION = re.compile(
    r"\bwhat\s+(is|are|does)\b|\bwhat's\b|\bdefin|\bmean|क्या\s+है|क्या\s+होता|मतलब|अर्थ"
    r"|શું\s+છે|ఏమిటి",
    re.IGNORECASE,
)
_DEFINITION = re.compile(
    r"\b(is|are)\s+(a|an|the)\b|\brefers?\s+to\b|\bmeans\b|\bdefined\s+as\b|\bknown\s+as\b"
    r"|\bcalled\b|को\s+कहते|कहा\s+जाता|का\s+अर्थ|मतलब|एक\s+\S+\s+है",
    re.IGNORECASE,
)
_DIGITS = "0-9\u0966-\u096f\u0ae6-\u0aef\u0c66-\u0c6f"
_NUMBER = re.compile(
    rf"[{_DIGITS}]|\b(two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty"
    r"|thirty|forty|fifty|hundred|thousand|million|billion|dozen)\b",
    re.IGNORECASE,
)
_DATE = re.compile(
    rf"(?<![{_DIGITS}])(1[0-9]|20)[0-9]{{2}}(?![{_DIGITS}])|[\u0966-\u096f]{{4}}|\b(january|february"
    r"|march|april|may|june|july|august|september|october|november|december|century|spring"
    r"|summer|autumn|fall|winter)\b"
    r"|जनवरी|फ़?फरवरी|फ़रवरी|मार्च|अप्रैल|मई|जून|जुलाई|अगस्त|सितंबर|सितम्बर|अक्टूबर|अक्तूबर|नवंबर"
    r"|नवम्बर|दिसंबर|दिसम्बर|सदी|शताब्दी|वसंत|गर्मी|सर्दी"
    r"|જાન્યુઆરી|ફેબ્રુઆરી|માર્ચ|એપ્રિલ|મે|જૂન|જુલાઈ|ઓગસ્ટ|સપ્ટેમ્બર|ઓક્ટોબર|નવેમ્બર|ડિસેમ્બર|સદી"
    r"|జనవరి|ఫిబ్రవరి|మార్చి|ఏప్రిల్|మే|జూన్|జూలై|ఆగస్టు|సెప్టెంబర్|అక్టోబర్|నవంబర్|డిసెంబర్|శతాబ్ద",
    re.IGNORECASE,
)


def asked_kind(query: str) -> str:
    """The kind of fact a question asks for: ``number`` (how much/many/long…, कितना, કેટલું,
    ఎంత), ``date`` (when, कब, ક્યારે, ఎప్పుడు) or ``other``. "How long ago…" style questions are
    numbers; a question matching both reads as a date ("in which year…how many")."""
    if _ASKS_DATE.search(query):
        return "date"
    if _ASKS_NUMBER.search(query):
        return "number"
    return "other"


class Idf:
    """Inverse document frequency per language over the index's passages,
    ln((N + 1) / (df + 0.5)) (the BM25 form without its floor); a token never seen gets the
    largest value, ln((N + 1) / 0.5)."""

    def __init__(self, passages: Iterable[Passage]) -> None:
        self.df: dict[str, Counter] = {}
        self.n: Counter = Counter()
        for p in passages:
            self.n[p.lang] += 1
            self.df.setdefault(p.lang, Counter()).update(set(tokenize(p.text)))

    def __call__(self, lang: str, token: str) -> float:
        n = self.n.get(lang) or max(self.n.values(), default=0)
        df = self.df.get(lang, Counter())[token]
        return math.log((n + 1) / (df + 0.5))


@dataclass(frozen=True, slots=True)
class Candidate:
    """One sentence (joined with the next when short) of a retrieved passage read in the query's
    language. ``hit`` is the retrieved passage it stands for (its cosine and rank), ``source`` the
    passage the text is taken from (``hit.passage`` or its sibling translation), ``index`` the
    sentence's position in ``source`` (0-based) of ``n_sentences``; ``features`` its signals
    (:class:`SelectionFeatures`); ``probability`` the model's belief that it states the answer
    (0-1)."""

    text: str
    source: Passage
    hit: Hit
    rank: int
    index: int
    n_sentences: int
    features: SelectionFeatures
    probability: float = 0.0


@dataclass(frozen=True, slots=True)
class Selection:
    """The chosen answer: ``text`` (at most two sentences, ``MAX_ANSWER_CHARS``), the candidate it
    starts from (``best``), the runner-up from another sentence (None when there is one
    candidate), the kind of fact the question asks for, and ``passage_coverage``: the largest
    IDF-weighted share of the question's content words that any retrieved passage contains (0-1;
    low when the question asks about something no passage mentions)."""

    text: str
    best: Candidate
    runner_up: Candidate | None
    asked: str
    passage_coverage: float = 0.0
    partner: Candidate | None = None
    """The second sentence shown with ``best``: the best-scored other sentence of the same passage
    that fits with it in ``MAX_ANSWER_CHARS``, when there is one."""
    ranked: tuple[Candidate, ...] = ()
    """Every candidate, best first (``ranked[0]`` is ``best``): what a reader reads the top of
    (rag/answer/stage.py)."""

    @property
    def detail(self) -> str:
        """One line for the trace: where the answer comes from and why it won."""
        b = self.best
        via = "" if b.source.id == b.hit.passage.id else f" via sibling of {b.hit.passage.id}"
        runner = "" if self.runner_up is None else (
            f"; runner-up {self.runner_up.source.id} s{self.runner_up.index + 1} "
            f"p {self.runner_up.probability:.2f}"
        )
        shown = f"sentence {b.index + 1}/{b.n_sentences}"
        if self.partner is not None:
            shown += f" + {self.partner.index + 1}/{b.n_sentences}"
        return (
            f"from {b.source.id}{via}, hit {b.rank + 1}, {shown}, "
            f"p {b.probability:.2f} (asks {self.asked}; idf coverage "
            f"{b.features.idf_coverage:.2f}, cosine {b.features.hit_score:.3f}){runner}"
        )


def sentences_of(text: str) -> list[str]:
    """Sentences of ``text``, a sentence shorter than ``MIN_SENTENCE_CHARS`` joined with the next
    (so "Cost:" or "Yes." is never a candidate on its own), except across a danda: a sentence
    that ends in "।" or "॥" is a whole Hindi sentence however short, and is never joined with
    another (issue 34: "यह हर प्री-वर्कआउट पाउडर ... मुख्य घटक है।", 55 characters, was shown
    joined to the sentence before it as one answer)."""
    pieces = split_sentences(text) or [text]
    out: list[str] = []
    carry = ""
    for piece in pieces:
        joined = f"{carry} {piece}".strip()
        if len(joined) < MIN_SENTENCE_CHARS and not joined.endswith(DANDAS):
            carry = joined
            continue
        out.append(joined)
        carry = ""
    if carry:
        if out and not out[-1].endswith(DANDAS):
            out[-1] = f"{out[-1]} {carry}"
        else:
            out.append(carry)
    return out


def _trigrams(tokens: Iterable[str]) -> set[str]:
    """Character trigrams of each token padded with spaces ("cost" → " co", "cos", "ost",
    "st "): robust to Indic inflection and transliteration variants."""
    out: set[str] = set()
    for t in tokens:
        padded = f" {t} "
        out.update(padded[i : i + 3] for i in range(len(padded) - 2))
    return out


def _bigrams(tokens: Sequence[str]) -> set[tuple[str, str]]:
    return set(zip(tokens, tokens[1:], strict=False))


def _weighted_share(weights: dict[str, float], matched: set[str]) -> float:
    """IDF-weighted share of the question's tokens (``weights``) that are in ``matched``."""
    total = sum(weights.values())
    if not total:
        return 0.0
    return sum(w for t, w in weights.items() if t in matched) / total


class _Question(NamedTuple):
    """What :func:`candidate_features` reads of the question once: its content words, their
    matcher and IDF weights, their bigrams and trigrams, the kind of fact asked, and the
    language's stopwords."""

    tokens: set[str]
    matcher: TokenMatcher
    weights: dict[str, float]
    bigrams: set[tuple[str, str]]
    trigrams: set[str]
    asked: str
    asks_name: bool
    asks_definition: bool
    stops: frozenset[str]

    @classmethod
    def of(cls, query: str, lang: str, idf: Idf) -> _Question:
        content = content_tokens(query, lang)
        tokens = set(content)
        asked = asked_kind(query)
        return cls(tokens, TokenMatcher(tokens), {t: idf(lang, t) for t in tokens},
                   _bigrams(content), _trigrams(tokens), asked,
                   asked == "other" and bool(_ASKS_NAME.search(query)),
                   bool(_ASKS_DEFINITION.search(query)), STOPWORDS.get(lang, frozenset()))


def candidate_features(
    query: str, lang: str, hits: Sequence[Hit], in_language: Callable[[Hit], Passage], idf: Idf
) -> list[Candidate]:
    """Every candidate sentence of ``hits`` (best first) with its features, unscored.

    ``in_language(hit)`` gives the passage to read for a hit: its sibling in the query's language
    when there is one, else the hit's own passage. A passage reached twice (a hit and another
    hit's sibling) is read once, at its better rank.
    """
    q = _Question.of(query, lang, idf)
    top_score = hits[0].score if hits else 0.0
    seen: set[str] = set()
    rows: list[tuple[str, Passage, Hit, int, int, int, SelectionFeatures]] = []
    for rank, hit in enumerate(hits):
        source = in_language(hit)
        if source.id in seen:
            continue
        seen.add(source.id)
        passage_share = _weighted_share(q.weights, q.matcher.matched(tokenize(source.text)))
        sentences = sentences_of(source.text)
        token_lists = [tokenize(sentence) for sentence in sentences]
        matched = [q.matcher.matched(sentence_tokens) for sentence_tokens in token_lists]
        for i, sentence in enumerate(sentences):
            features = _sentence_features(
                q, sentence, token_lists[i], matched, i, float(hit.score), top_score, rank,
                passage_share, source.lang == lang)
            rows.append((sentence, source, hit, rank, i, len(sentences), features))
    if not rows:
        return []
    # Per-question relative signals: how far each candidate is behind the best one.
    best_idf = max(r[6].idf_coverage for r in rows)
    best_window = max(r[6].window_idf_coverage for r in rows)
    best_dice = max(r[6].trigram_dice for r in rows)
    return [
        Candidate(text, source, hit, rank, i, n, f._replace(
            idf_coverage_gap=f.idf_coverage - best_idf,
            window_gap=f.window_idf_coverage - best_window,
            trigram_gap=f.trigram_dice - best_dice,
        ))
        for text, source, hit, rank, i, n, f in rows
    ]


def _sentence_features(q: _Question, sentence: str, sentence_tokens: list[str],
                       matched: list[set[str]], i: int, hit_score: float, top_score: float,
                       rank: int, passage_share: float, is_same_language: bool
                       ) -> SelectionFeatures:
    """The :class:`SelectionFeatures` of sentence ``i`` of a passage (``matched``: the
    question's tokens each of its sentences holds), the three gaps left at 0 (set once every
    candidate is known)."""
    previous = matched[i - 1] if i > 0 else set()  # the question's tokens the one before holds
    following = matched[i + 1] if i + 1 < len(matched) else set()
    content = [w for w in sentence_tokens if w not in q.stops]
    novel_set = {w for w in content if not q.matcher.of_word(w)}
    has_number = bool(_NUMBER.search(sentence))
    has_date = q.asked == "date" and bool(_DATE.search(sentence))  # read only then
    trigrams = _trigrams(set(content))
    dice = 2 * len(trigrams & q.trigrams) / max(len(trigrams) + len(q.trigrams), 1)
    named = q.asks_name and any(w[:1].isupper() and w.lower().strip(".,;:!?()\"'") in novel_set
                                for w in sentence.split())
    return SelectionFeatures(
        hit_score=hit_score,
        hit_gap=float(top_score - hit_score),
        hit_rank=float(rank),
        idf_coverage=_weighted_share(q.weights, matched[i]),
        coverage=len(matched[i]) / len(q.tokens) if q.tokens else 0.0,
        passage_idf_coverage=passage_share,
        novel_share=len(novel_set) / max(len(set(content)), 1),
        log_chars=math.log(len(sentence) + 1),
        is_first=float(i == 0),
        position=i / max(len(matched) - 1, 1),
        asks_number_has=float(q.asked == "number" and has_number),
        asks_number_missing=float(q.asked == "number" and not has_number),
        asks_date_has=float(q.asked == "date" and has_date),
        asks_date_missing=float(q.asked == "date" and not has_date),
        has_number=float(has_number),
        same_language=float(is_same_language),
        window_idf_coverage=_weighted_share(q.weights, matched[i] | previous),
        bigram_share=len(q.bigrams & _bigrams(content)) / max(len(q.bigrams), 1),
        trigram_dice=dice,
        asks_name_has=float(named),
        next_idf_coverage=_weighted_share(q.weights, following),
        asks_definition_has=float(q.asks_definition and bool(_DEFINITION.search(sentence))),
        idf_coverage_gap=0.0,
        window_gap=0.0,
        trigram_gap=0.0,
    )


@dataclass(frozen=True, slots=True)
class AnswerSelector:
    """Logistic model over :data:`FEATURES`: p = sigmoid(w · (x − mean) / scale + b)."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    two_sentences: bool = True

    @classmethod
    def load(cls, path: Path = MODEL_PATH) -> AnswerSelector:
        """Raises ModelFileError (missing, unreadable or stale file, named)."""
        data = read_model_file(path, FEATURES, ("mean", "scale", "coef", "intercept"))
        return cls(
            np.asarray(data["mean"]),
            np.asarray(data["scale"]),
            np.asarray(data["coef"]),
            float(data["intercept"]),
            bool(data.get("two_sentences", True)),
        )

    def write(self, path: Path = MODEL_PATH, **fitted: object) -> None:
        """Write the model file (``features``, ``mean``, ``scale``, ``coef``, ``intercept``,
        ``two_sentences``, then ``fitted``: what the fit records of itself), read back by
        :meth:`load`."""
        data = {"features": list(FEATURES), "mean": self.mean.tolist(),
                "scale": self.scale.tolist(), "coef": self.coef.tolist(),
                "intercept": self.intercept, "two_sentences": self.two_sentences, **fitted}
        Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        type(self).load(path)

    @classmethod
    def neutral(cls) -> AnswerSelector:
        """Every candidate equal (best = first sentence of the top hit): what a fit starts from,
        so ``scripts/fit_answering.py`` runs whatever the shipped model file holds."""
        zeros = np.zeros(len(FEATURES))
        return cls(zeros, np.ones(len(FEATURES)), zeros, 0.0)

    def score(self, candidates: list[Candidate]) -> list[Candidate]:
        """The candidates with ``probability`` set, best first (ties: better rank, earlier)."""
        if not candidates:
            return []
        x = np.stack([c.features.vector() for c in candidates])
        logits = ((x - self.mean) / self.scale) @ self.coef + self.intercept
        probabilities = 1.0 / (1.0 + np.exp(-logits))
        scored = [
            Candidate(c.text, c.source, c.hit, c.rank, c.index, c.n_sentences, c.features, float(p))
            for c, p in zip(candidates, probabilities, strict=True)
        ]
        return sorted(scored, key=lambda c: (-c.probability, c.rank, c.index))

    def select(
        self,
        query: str,
        lang: str,
        hits: Sequence[Hit],
        in_language: Callable[[Hit], Passage],
        idf: Idf,
    ) -> Selection | None:
        """The best candidate of ``hits`` as an answer; None when no hit has text."""
        return self.choose(query, candidate_features(query, lang, hits, in_language, idf))

    def choose(self, query: str, candidates: list[Candidate]) -> Selection | None:
        """Score ``candidates`` and compose the answer from the best one (None when empty)."""
        return self.compose(query, self.score(candidates))

    def compose(self, query: str, ranked: list[Candidate]) -> Selection | None:
        """The answer from candidates already ranked best first (None when empty): the best one,
        with its partner sentence when ``two_sentences``."""
        if not ranked:
            return None
        best = ranked[0]
        runner_up = ranked[1] if len(ranked) > 1 else None
        text, partner = best.text, None
        if self.two_sentences:
            partner = next((c for c in ranked[1:] if c.source.id == best.source.id
                            and len(best.text) + len(c.text) < MAX_ANSWER_CHARS), None)
            if partner is not None:
                text = answer_text(best, partner)
                partner = partner if text != best.text else None
        passage_coverage = max(c.features.passage_idf_coverage for c in ranked)
        return Selection(shorten(text), best, runner_up, asked_kind(query), passage_coverage,
                         partner, tuple(ranked))


def answer_text(best: Candidate, partner: Candidate) -> str:
    """The best sentence with ``partner`` (the best-scored other sentence of the same passage that
    fits with it) when both fit in ``MAX_ANSWER_CHARS``, in passage order so the two read as the
    passage does (out of fold this shows the answer span for more of the questions than the best
    sentence alone, and taking the best-scored sentence that fits rather than stopping at a
    runner-up too long to join adds more in Hindi: scripts/fit_answering.py; the figures:
    docs/benchmarks.md, "Figures behind the code's constants")."""
    first, second = sorted((best, partner), key=lambda c: c.index)
    joined = f"{first.text} {second.text}"
    return joined if len(joined) <= MAX_ANSWER_CHARS else best.text


def shorten(text: str, max_chars: int = MAX_ANSWER_CHARS) -> str:
    """``text`` cut at a word boundary to ``max_chars`` with an ellipsis when longer."""
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars].rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:") + "…"
