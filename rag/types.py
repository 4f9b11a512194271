"""Named result types shared by every stage of the pipeline.

Nothing here imports Telegram, httpx or a model: these are plain data that a CLI, the bot or a
test can build and read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum

LANGUAGES: tuple[str, ...] = ("en", "hi", "gu", "te")
"""Languages the corpus and the floors cover, as ISO 639-1 codes."""


class Status(StrEnum):
    """Every outcome of one question. ``ANSWERED`` (the gate is sure) shows the answer as it is,
    ``HEDGED`` (the gate is above its hedge floor but not sure, issue 31) shows it as "not sure,
    the closest passage says"; anything else shows no answer text."""

    ANSWERED = "answered"
    HEDGED = "hedged"
    REFUSED_BAD_INPUT = "refused-bad-input"
    REFUSED_NO_MATCH = "refused-no-match"
    REFUSED_UNANSWERABLE = "refused-unanswerable"
    REFUSED_UNGROUNDED = "refused-ungrounded"
    ERROR = "error"

    @property
    def is_refusal(self) -> bool:
        return self.value.startswith("refused")


class ReasonCode(StrEnum):
    """Why a question got no answer, as a value front ends switch on (never parse the wording).

    Input guard (``Status.REFUSED_BAD_INPUT``): ``empty``, ``too_short``, ``too_long`` (in
    decisions stored before over-long questions were cut instead, :class:`QuestionCut`),
    ``garbled``, ``unsupported_language``, ``injection``. Relevance guard
    (``REFUSED_NO_MATCH``): ``no_passages`` (the search returned nothing), ``below_floor``.
    Answerability gate (``REFUSED_UNANSWERABLE``): ``not_answerable``; the lexical guard after
    it (also ``REFUSED_UNANSWERABLE``): ``no_shared_words`` (the chosen passage has no content
    word of the question). Answer stage
    (``REFUSED_UNGROUNDED``): ``no_candidate`` (no sentence to show), ``ungrounded`` (the answer
    failed the grounding guard). Speech (a voice note that never reached the pipeline; the bot
    sets these): ``speech_*``. ``pipeline_error`` (``Status.ERROR``): an unexpected failure.
    """

    EMPTY = "empty"
    TOO_SHORT = "too_short"
    TOO_LONG = "too_long"
    GARBLED = "garbled"
    UNSUPPORTED_LANGUAGE = "unsupported_language"
    INJECTION = "injection"
    NO_PASSAGES = "no_passages"
    BELOW_FLOOR = "below_floor"
    NOT_ANSWERABLE = "not_answerable"
    HEDGED = "hedged"
    NO_SHARED_WORDS = "no_shared_words"
    NO_CANDIDATE = "no_candidate"
    UNGROUNDED = "ungrounded"
    SPEECH_REFUSED = "speech_refused"
    PIPELINE_ERROR = "pipeline_error"


@dataclass(frozen=True, slots=True)
class Reason:
    """A refusal's or error's cause with its numbers; the only thing front ends word users'
    text from.

    Which fields a code fills: ``too_long`` n_chars and max_chars (characters, after the input
    guard's cleaning); ``too_short`` n_letters; ``below_floor`` score (top hit's cosine), floor
    and lang; ``no_passages`` floor and lang; ``not_answerable`` and ``hedged`` score, floor,
    lang, probability and threshold (the gate's; ``hedged``'s threshold is the confident one);
    ``no_shared_words`` score, floor and lang; ``speech_refused`` key (the bot's message key for
    that kind of voice note) and, for the keys that state a limit, max_s (seconds) or max_mb
    (megabytes).
    ``detail`` is the operator's English line for logs and ``/why`` (e.g.
    ``"top 0.779 < floor 0.840 (en)"``): shown as is, never parsed.
    """

    code: ReasonCode
    detail: str = ""
    n_chars: int | None = None
    max_chars: int | None = None
    n_letters: int | None = None
    score: float | None = None
    floor: float | None = None
    lang: str | None = None
    probability: float | None = None
    threshold: float | None = None
    key: str | None = None
    max_s: float | None = None
    max_mb: float | None = None

    def to_dict(self) -> dict:
        """JSON-ready: the code's value and the fields that are set."""
        out = {"code": self.code.value}
        for f in fields(self)[1:]:
            value = getattr(self, f.name)
            if value not in (None, ""):
                out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Reason:
        return cls(**{**data, "code": ReasonCode(data["code"])})


@dataclass(frozen=True, slots=True)
class QuestionCut:
    """A question the input guard cut to its length limit instead of reading it whole
    (``Result.cut``): it had ``n_chars`` characters after cleaning, the first ``n_kept`` were
    read (cut at a word boundary where one is near), and the limit is ``max_chars``
    (``RagSettings.max_query_chars``). Front ends say so in the reply."""

    n_chars: int
    n_kept: int
    max_chars: int


class FallbackCode(StrEnum):
    """Why generative mode answered extractively instead (``Result.fallback``). The first five
    concern the model's output; the rest (the client's ``ServiceError.reason``) the service."""

    MALFORMED = "malformed"
    MALFORMED_OUTPUT = "malformed_output"
    EMPTY_ANSWER = "empty_answer"
    NO_VALID_CITATIONS = "no_valid_citations"
    UNGROUNDED = "ungrounded"
    WRONG_LANGUAGE = "wrong_language"
    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    BAD_REQUEST = "bad_request"
    UNAUTHORIZED = "unauthorized"
    NETWORK = "network"

    @property
    def kind(self) -> str:
        """What the user is told: ``malformed`` (unreadable output), ``unsupported`` (output not
        supported by the passages), ``language`` (wrong language) or ``service`` (unavailable)."""
        return _FALLBACK_KINDS.get(self, "service")


_FALLBACK_KINDS = {
    FallbackCode.MALFORMED: "malformed",
    FallbackCode.MALFORMED_OUTPUT: "malformed",
    FallbackCode.EMPTY_ANSWER: "unsupported",
    FallbackCode.NO_VALID_CITATIONS: "unsupported",
    FallbackCode.UNGROUNDED: "unsupported",
    FallbackCode.WRONG_LANGUAGE: "language",
}


@dataclass(frozen=True, slots=True)
class Passage:
    """One corpus passage, as stored in ``passages.jsonl``.

    ``id`` is ``{lang}-{query_id}-{passage_index}``; ``passage_index`` matches across languages,
    so ``hi-1102432-5`` is the Hindi translation of ``en-1102432-5``.
    """

    id: str
    lang: str
    text: str
    query_id: int
    passage_index: int
    is_selected: bool = False

    def sibling_id(self, lang: str) -> str:
        """Id of this passage's parallel translation in ``lang``."""
        return f"{lang}-{self.query_id}-{self.passage_index}"


@dataclass(frozen=True, slots=True)
class Hit:
    """A retrieved passage. ``score`` is the cosine similarity in [-1, 1];
    ``rank_score`` adds the same-language bonus (dense retrieval) or is the fused score (hybrid)
    and only orders hits. ``dense_rank``/``sparse_rank`` (1-based) are the passage's places in
    the dense pool and the BM25 ranking of a hybrid search, None where it is not in one."""

    passage: Passage
    score: float
    rank_score: float
    dense_rank: int | None = None
    sparse_rank: int | None = None


@dataclass(frozen=True, slots=True)
class Citation:
    """A passage the answer rests on, with its cosine to the query."""

    passage_id: str
    lang: str
    score: float
    excerpt: str


@dataclass(frozen=True, slots=True)
class Stage:
    """One decision in the trace, e.g.
    ``Stage("relevance_guard", "refused", "top 0.779 < floor 0.840 (en)", 0.01)``."""

    name: str
    decision: str
    detail: str
    elapsed_ms: float


@dataclass(slots=True)
class Trace:
    """Ordered list of stages; ``total_ms`` sums their elapsed time."""

    stages: list[Stage] = field(default_factory=list)

    def add(self, name: str, decision: str, detail: str = "", elapsed_ms: float = 0.0) -> Stage:
        stage = Stage(name, decision, detail, round(elapsed_ms, 3))
        self.stages.append(stage)
        return stage

    @contextmanager
    def timed(self, name: str) -> Iterator[_OpenStage]:
        """Time a block and record it as one stage; the block sets ``decision`` and ``detail``.

        If the block raises, the stage is recorded with decision ``error`` and the exception
        propagates.
        """
        open_stage = _OpenStage()
        start = time.perf_counter()
        try:
            yield open_stage
        except BaseException as exc:
            open_stage.decision, open_stage.detail = "error", f"{type(exc).__name__}: {exc}"
            raise
        finally:
            elapsed_ms = (time.perf_counter() - start) * 1000
            self.add(name, open_stage.decision, open_stage.detail, elapsed_ms)

    @property
    def total_ms(self) -> float:
        return round(sum(s.elapsed_ms for s in self.stages), 3)

    def get(self, name: str) -> Stage | None:
        """The last stage called ``name``, or None."""
        return next((s for s in reversed(self.stages) if s.name == name), None)

    def to_list(self) -> list[dict]:
        return [asdict(s) for s in self.stages]

    @classmethod
    def from_list(cls, rows: list[dict]) -> Trace:
        return cls([Stage(**row) for row in rows])


@dataclass(slots=True)
class _OpenStage:
    decision: str = "ok"
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Turn:
    """The previous turn of a conversation (issue 44), as the chat layer keeps it:
    ``question`` the earlier question as it was searched (``Result.searched or Result.query``),
    ``lang`` its language ("" when unknown), ``passage_ids`` the passages its reply cited (best
    first; empty when it was refused), ``answer`` the answer text shown ("" when refused)."""

    question: str
    lang: str = ""
    passage_ids: tuple[str, ...] = ()
    answer: str = ""


@dataclass(frozen=True, slots=True)
class FollowUpReading:
    """How the pipeline read a message that came after a previous turn (issue 44):
    ``is_followup`` whether it leaned on that turn (the context was used), ``searched`` the
    search it was read as when used ("" otherwise), ``detail`` why, for /why and the log."""

    is_followup: bool
    searched: str = ""
    detail: str = ""


@dataclass(frozen=True, slots=True)
class LanguageBasis:
    """How a question's language was decided and what was searched for it, decided once by
    :func:`rag.language.read_language` and carried on the result, so no later layer works it
    out again.

    ``lang`` the question's language; ``source`` what decided it: ``explicit`` (the chat's
    ``/lang`` or ``--lang``), ``speech-to-text`` (Sarvam's language code of a voice note) or
    ``script`` (the letters of the text, :func:`rag.language.detect_language`); ``script`` the
    language the text's letters are in (:func:`rag.language.script_language`; None: no letters
    of the four scripts); ``read_as`` the Devanagari that Hindi typed in Latin letters spells
    (:mod:`rag.romanized`; ``""`` for any other question); ``searched`` the text searched when
    it differs from the question (that reading, spoken fillers removed), else ``""``;
    ``fillers_removed`` whether spoken fillers were taken out; ``tied`` the Indic scripts that
    tie for most words (:func:`rag.language.script_tie`; the question is then refused)."""

    lang: str
    source: str
    script: str | None
    read_as: str = ""
    searched: str = ""
    fillers_removed: bool = False
    tied: tuple[str, ...] = ()

    @property
    def is_latin_hindi(self) -> bool:
        """The question is Hindi typed in Latin letters."""
        return bool(self.read_as)

    @property
    def is_determined(self) -> bool:
        """Something decided the language: ``/lang``, speech-to-text or the letters of one of
        the four scripts; not so for emoji, digits or another script, whose ``en`` is only the
        pipeline's default."""
        return self.source != "script" or self.script is not None

    def replies_in_latin(self, reply_lang: str) -> bool:
        """Whether a text reply in ``reply_lang`` is best spelled in Latin letters: the
        question was Hindi typed in Latin letters and the reply is Hindi too."""
        return reply_lang == "hi" and self.is_latin_hindi

    def describe(self) -> str:
        """The ``language`` stage's detail, e.g. ``script; Hindi in Latin letters, read as: …;
        fillers removed: …``."""
        how = self.source
        if self.tied:
            how += f"; scripts tie ({', '.join(self.tied)}): not broken towards one"
        if self.read_as:
            how += f"; Hindi in Latin letters, read as: {self.read_as}"
        if self.fillers_removed:
            how += f"; fillers removed: {self.searched}"
        return how


@dataclass(slots=True)
class Result:
    """The one outcome type for a question: answered, refused or error, always with its trace.

    ``top_score`` and ``floor`` are cosine similarities (None when retrieval did not run).
    ``reason`` is set for every refusal and error: front ends word them for users from it (and
    ``status``), never from ``message``, the short English line for operators (logs, the CLI).
    ``fallback`` is set when generative mode answered extractively instead. ``query`` is the
    question as the user put it (the input guard's cleaned text); ``searched`` what the pipeline
    searched when that differs ("chai mein caffeine kitna hota hai" is searched as "chai में
    caffeine कितना होता है"; spoken fillers removed), else ``""``. A hedged answer
    (``Status.HEDGED``) carries its answer and citations as a confident one does, and ``reason``
    with the gate's probability and thresholds (``ReasonCode.HEDGED``). ``best_passage_id`` and
    ``best_passage_score`` (its cosine) name the first hit of the search whatever the outcome,
    a refusal included (None when the search did not run or found nothing): the dashboard's
    list of refused questions shows what came closest. ``basis`` says how the language was
    decided (None where the language stage did not run, and for decisions stored without it).
    ``followup`` is how the message was read
    when it came after a previous turn (``Pipeline.ask(..., after=...)``, issue 44): whether it
    leaned on that turn and what it was searched as; None when it was read with no turn before
    it. ``cut`` is set when the question was longer than the input guard's limit and only
    its beginning was read (``query`` is that beginning), else None.
    """

    status: Status
    query: str
    lang: str
    answer: str = ""
    answer_lang: str = ""
    citations: list[Citation] = field(default_factory=list)
    top_score: float | None = None
    floor: float | None = None
    is_low_confidence: bool = False
    mode: str = "extractive"
    message: str = ""
    trace: Trace = field(default_factory=Trace)
    reason: Reason | None = None
    fallback: FallbackCode | None = None
    searched: str = ""
    best_passage_id: str | None = None
    best_passage_score: float | None = None
    basis: LanguageBasis | None = None
    followup: FollowUpReading | None = None
    cut: QuestionCut | None = None

    @property
    def is_answered(self) -> bool:
        """A confident answer (``Status.ANSWERED``); see :attr:`shows_answer`."""
        return self.status is Status.ANSWERED

    @property
    def is_hedged(self) -> bool:
        return self.status is Status.HEDGED

    @property
    def shows_answer(self) -> bool:
        """Answer text is shown: confident or hedged."""
        return self.status in (Status.ANSWERED, Status.HEDGED)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["status"] = self.status.value
        out["reason"] = None if self.reason is None else self.reason.to_dict()
        out["fallback"] = None if self.fallback is None else self.fallback.value
        out["trace"] = self.trace.to_list()
        out["total_ms"] = self.trace.total_ms
        return out
