"""Turn a :class:`rag.types.Result` or a trace into channel-neutral :class:`Text`. Pure.

Users' words come from :mod:`bot.chat.messages`, chosen by the result's typed ``reason`` and
``fallback`` and filled with their numbers; no text of another layer is parsed. A :class:`Text`
is a sequence of :class:`Span` (plain, bold, italic or code); each front end writes it with its
own :class:`Markup` (Telegram HTML in ``bot.telegram.markup``, WhatsApp's ``*bold*`` in
``bot.whatsapp.markup``, :data:`PLAIN` for a terminal) and splits it at its own length limit.
No front end ever rewrites another channel's markup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from bot.chat.limits import ANSWER_BOUND_STAGE
from bot.chat.messages import language_name, t
from rag.numbers import side_by_side
from rag.romanized import to_latin
from rag.text import excerpt
from rag.types import (
    Citation,
    FollowUpReading,
    QuestionCut,
    Reason,
    ReasonCode,
    Result,
    Stage,
    Status,
    Trace,
)

TRANSCRIPT_CHARS = 300
"""Longest transcript echoed above a voice answer ("You said: …"), in characters: enough for
any question the pipeline accepts to be recognisable, short of flooding the chat."""
WHY_QUERY_CHARS = 200
"""Longest question shown by ``/why``, in characters (before escaping): with the stage details
cut to ``WHY_DETAIL_CHARS``, a whole trace fits one message even after a 4,000-character
question."""
WHY_DETAIL_CHARS = 300
"""Longest stage detail shown by ``/why``, in characters (the longest the pipeline writes fit:
three hits with scores, ~120; the gate's summary, ~220 when the screen decides alone; error
texts can be longer)."""

Style = Literal["plain", "bold", "italic", "code"]


@dataclass(frozen=True, slots=True)
class Span:
    """A run of text in one ``style``; ``text`` is raw (never escaped), line breaks included."""

    text: str
    style: Style = "plain"


@dataclass(frozen=True, slots=True)
class Text:
    """One message's text, channel-neutral: spans in order. ``str(text)`` is the plain text."""

    spans: tuple[Span, ...] = ()

    @classmethod
    def plain(cls, text: str) -> Text:
        return cls((Span(text),))

    @classmethod
    def join(cls, separator: str, texts: Iterable[Text]) -> Text:
        """``texts`` one after the other, ``separator`` (plain) between them."""
        spans: list[Span] = []
        for n, text in enumerate(texts):
            if n and separator:
                spans.append(Span(separator))
            spans.extend(text.spans)
        return cls(tuple(spans))

    def __add__(self, other: Text) -> Text:
        return Text(self.spans + other.spans)

    def __str__(self) -> str:
        return "".join(span.text for span in self.spans)


def _t(*spans: Span | str) -> Text:
    return Text(tuple(Span(s) if isinstance(s, str) else s for s in spans))


@dataclass(frozen=True, slots=True)
class Markup:
    """How a channel marks text up: ``text`` makes outside text safe (escaping), the others
    wrap already safe text in a style."""

    text: Callable[[str], str]
    bold: Callable[[str], str]
    italic: Callable[[str], str]
    code: Callable[[str], str]

    def render(self, text: Text) -> str:
        """``text`` in this markup, every span escaped by :attr:`text` and styled."""
        out = []
        for span in text.spans:
            safe = self.text(span.text)
            out.append(safe if span.style == "plain" or not span.text.strip()
                       else getattr(self, span.style)(safe))
        return "".join(out)


PLAIN = Markup(str, str, str, str)
"""Terminal text: no markup, nothing escaped."""


def render_result(result: Result, lang: str, transcript: str | None = None, *,
                  with_sources: bool = True) -> Text:
    """One question's outcome, in the user's language ``lang``.

    Paragraphs, in order: the transcript line (voice only, when ``transcript`` is given; cut to
    about ``TRANSCRIPT_CHARS``), a note stating the input guard's limit when the question was cut
    to it (``result.cut``), then either the answer (its citation marker, ``[1]``, or ``[1][2]``
    for a generated answer citing two passages; with a low-confidence note when
    flagged, a note when the answer's passage is in another language, one when generative
    mode fell back to the passage, and one when it was shortened to fit) followed by the cited
    passages (id, language, score to 3 decimals, the citation's excerpt), or the refusal/error
    wording (:func:`refusal_text`).

    A question typed in Latin letters gets its reply in Latin letters when ``lang`` is written
    in another script (:func:`replies_in_latin`: "chai mein caffeine kitna hota hai" is
    answered "... hota hai", not in Devanagari), the cited passages' excerpts beside it in their
    own script.

    Paragraphs are separated by a blank line; a front end splits the text at its own limit.
    ``with_sources`` False leaves the sources out, for a front end that lists
    ``result.citations`` itself (the web page).
    """
    say = to_latin if replies_in_latin(result, lang) else _as_is
    parts: list[Text] = []
    if transcript is not None:
        heard = excerpt(transcript, TRANSCRIPT_CHARS)
        parts.append(_t(Span(t("you_said", lang), "italic"), " " + heard))
    if result.cut is not None:
        parts.append(_t(Span(say(cut_text(result.cut, lang)), "italic")))
    if result.shows_answer:  # confident, or hedged (worded "not sure" by _answer_parts)
        parts.extend(_answer_parts(result, lang, say, with_sources=with_sources))
    else:
        parts.append(Text.plain(say(refusal_text(result, lang))))
    return Text.join("\n\n", parts)


def replies_in_latin(result: Result, lang: str) -> bool:
    """Whether the reply to ``result`` in ``lang`` is written in Latin letters: the pipeline
    read the question as Hindi typed in Latin letters ("xbox 360 ki keemat kitni hai",
    ``result.basis``) and the reply is Hindi. An English question in a chat set to ``/lang hi``
    is answered in Devanagari, as that chat asked. The text reply only: a voice note speaks the
    language itself, and the decision log keeps the answer as the passage has it."""
    return result.basis is not None and result.basis.replies_in_latin(lang)


def _as_is(text: str) -> str:
    return text


def render_result_text(result: Result, lang: str, transcript: str | None = None) -> str:
    """:func:`render_result` as plain text (the command line)."""
    return PLAIN.render(render_result(result, lang, transcript))


def render_trace(stages: Trace | Iterable[Stage], lang: str, query: str | None = None,
                 followup: FollowUpReading | None = None) -> Text:
    """``/why``: a header, the question (if given, cut to about ``WHY_QUERY_CHARS``), how it
    was read after the previous turn when ``followup`` is given (the result's
    ``Result.followup``: "read with your previous question, searched as …", or "read on its
    own"), one line per stage ``name — decision: detail (elapsed ms to 1 decimal)`` (details
    cut to about ``WHY_DETAIL_CHARS``), then the total in ms.

    An empty trace gives the "nothing to explain yet" message.
    """
    stage_list = list(stages.stages if isinstance(stages, Trace) else stages)
    if not stage_list:
        return Text.plain(t("why_empty", lang))
    lines = [_t(Span(t("why_header", lang), "bold"))]
    if query:
        lines.append(Text.plain(t("why_query", lang, query=excerpt(query, WHY_QUERY_CHARS))))
    if followup is not None and followup.is_followup:
        lines.append(Text.plain(t("why_followup_used", lang,
                                  searched=excerpt(followup.searched, WHY_QUERY_CHARS))))
    elif followup is not None:
        lines.append(Text.plain(t("why_followup_alone", lang)))
    for stage in stage_list:
        detail = excerpt(stage.detail, WHY_DETAIL_CHARS)
        detail = f": {detail}" if detail else ""
        lines.append(_t(Span(stage.name, "code"),
                        f" — {stage.decision}{detail} ({stage.elapsed_ms:.1f} ms)"))
    total_ms = sum(stage.elapsed_ms for stage in stage_list)
    lines.append(_t(Span(t("why_total", lang), "bold"), f": {total_ms:.1f} ms"))
    return Text.join("\n", lines)


def why_summary(result: Result, lang: str, stages: Iterable[Stage] | None = None) -> str:
    """How ``result`` was decided in one plain-language paragraph in ``lang``, for someone who
    does not read the stage table: answered (the closest passage's score against the floor of
    the question's language), answered but not sure (the answerability gate's certainty
    against what a plain answer needs, in percent), or not answered and why (the refusal's own
    sentence, :func:`refusal_text`); then how long it took over how many steps (``stages``:
    the trace's, default ``result.trace``'s, spoken-reply stages included when given). A
    message read as a follow-up of the previous question says so, with what was searched."""
    stage_list = list(result.trace.stages if stages is None else stages)
    score, floor = (side_by_side(result.top_score, result.floor)
                    if result.top_score is not None and result.floor is not None
                    else (_fmt(result.top_score), _fmt(result.floor)))
    language = language_name(result.lang, lang)
    reason = result.reason
    if result.status is Status.ANSWERED:
        head = t("why_summary_answered", lang, score=score, floor=floor, language=language)
    elif result.is_hedged:
        gate = reason or Reason(ReasonCode.HEDGED)
        head = t("why_summary_hedged", lang, score=score, floor=floor, language=language,
                 percent=_percent(gate.probability), needed=_percent(gate.threshold))
    elif result.status.is_refusal:
        head = t("why_summary_refused", lang, reason=refusal_text(result, lang))
    else:
        head = t("why_summary_error", lang)
    if result.followup is not None and result.followup.is_followup:
        head += " " + t("why_followup_used", lang,
                        searched=excerpt(result.followup.searched, WHY_QUERY_CHARS)) + "."
    total_s = sum(stage.elapsed_ms for stage in stage_list) / 1000
    return head + " " + t("why_summary_time", lang, seconds=f"{total_s:.2f}",
                          n_steps=len(stage_list))


def _answer_parts(result: Result, lang: str, say: Callable[[str], str] = _as_is, *,
                  with_sources: bool = True) -> list[Text]:
    """The answer, its notes and its sources, every sentence passed through ``say`` (the
    reply's script) except the sources' excerpts, shown in their own script."""
    answer = result.answer.strip()
    if result.is_hedged:  # "I'm not sure this answers it; the closest passage says: … [1]"
        answer = t("hedged", lang, answer=answer)
    elif result.citations:
        answer = f"{answer} {citation_marks(result)}"
    parts = [Text.plain(say(answer))]
    notes = []
    if result.is_low_confidence:
        notes.append(t("low_confidence", lang, **_score_and_floor(result.top_score,
                                                                   result.floor)))
    if result.answer_lang and result.answer_lang != lang:
        notes.append(t("answer_from", lang, language=language_name(result.answer_lang, lang)))
    if result.fallback is not None:  # generative mode answered extractively
        reason = t(f"fallback_{result.fallback.kind}", lang)
        notes.append(t("generative_fallback", lang, reason=reason))
    if result.trace.get(ANSWER_BOUND_STAGE) is not None:  # cut to MAX_ANSWER_CHARS
        notes.append(t("answer_shortened", lang))
    parts.extend(_t(Span(say(note), "italic")) for note in notes)
    if result.citations and with_sources:
        lines = [_t(Span(say(t("sources", lang)), "bold"))]
        lines.extend(_citation(n, c, lang, say) for n, c in enumerate(result.citations, start=1))
        parts.append(Text.join("\n", lines))
    return parts


def citation_marks(result: Result) -> str:
    """The marks an answer ends with, numbering the sources listed under it: ``[1]`` for an
    extractive answer (read from the first source; the others are the passage it translates
    and the top hit), every source (``[1][2]``) for a generated one, which cites them all;
    ``""`` with no sources."""
    if not result.citations:
        return ""
    n_cited = len(result.citations) if result.mode == "generative" else 1
    return "".join(f"[{n}]" for n in range(1, n_cited + 1))


def cut_text(cut: QuestionCut, lang: str) -> str:
    """The note on a question cut to the input guard's limit, in ``lang``, with its numbers
    (characters, thousands separated)."""
    return t("question_cut", lang, n_chars=f"{cut.n_chars:,}", n_kept=f"{cut.n_kept:,}",
             max_chars=f"{cut.max_chars:,}")


def _citation(n: int, citation: Citation, lang: str,
              say: Callable[[str], str] = _as_is) -> Text:
    head = _t(f"{n}. ", Span(citation.passage_id, "code"),
              say(f" · {language_name(citation.lang, lang)} · {t('score', lang)} ")
              + f"{citation.score:.3f}")
    return head + _t("\n", Span(citation.excerpt, "italic")) if citation.excerpt else head


_BAD_INPUT_KEYS = {
    ReasonCode.EMPTY: "bad_input_empty",
    ReasonCode.TOO_SHORT: "bad_input_too_short",
    ReasonCode.GARBLED: "bad_input_garbled",
    ReasonCode.UNSUPPORTED_LANGUAGE: "bad_input_unsupported_language",
    ReasonCode.INJECTION: "bad_input",
}
"""Message key of each input-guard refusal without numbers (``too_long`` states its limit)."""


def refusal_text(result: Result, lang: str) -> str:
    """The refusal or error sentence for ``result``, as plain text (not escaped) in ``lang``,
    chosen by ``result.reason`` and stating its numbers (score, floor, character limit): what
    the reply shows and a spoken reply says. A result stored before reasons were recorded
    (``reason`` None) is worded from its status, score and floor."""
    reason = result.reason
    if reason is None:
        return _status_text(result, lang)
    numbers = _score_and_floor(reason.score, reason.floor)
    match reason.code:
        case ReasonCode.TOO_LONG:
            return t("bad_input_too_long", lang, max_chars=reason.max_chars)
        case code if code in _BAD_INPUT_KEYS:
            return t(_BAD_INPUT_KEYS[code], lang)
        case ReasonCode.NO_PASSAGES:
            return t("refused_no_passages", lang, floor=numbers["floor"])
        case ReasonCode.BELOW_FLOOR:
            return t("refused_no_match", lang, **numbers)
        case ReasonCode.NOT_ANSWERABLE:
            # the gate refuses after the relevance guard passed: the score is above the floor
            return t("refused_unanswerable_scored", lang, **numbers)
        case ReasonCode.NO_SHARED_WORDS:
            return t("refused_no_shared_words", lang, **numbers)
        case ReasonCode.NO_CANDIDATE | ReasonCode.UNGROUNDED:
            return _with_scores(t("refused_ungrounded", lang), reason.score, reason.floor, lang)
        case ReasonCode.SPEECH_REFUSED if reason.key:
            return t(reason.key, lang, **_limits(reason))
        case _:
            return t("error", lang)


def _status_text(result: Result, lang: str) -> str:
    """Wording of a result without a reason (rows stored before reasons were)."""
    numbers = _score_and_floor(result.top_score, result.floor)
    match result.status:
        case Status.REFUSED_NO_MATCH if result.top_score is None:
            return t("refused_no_passages", lang, floor=numbers["floor"])
        case Status.REFUSED_NO_MATCH:
            return t("refused_no_match", lang, **numbers)
        case Status.REFUSED_UNANSWERABLE if result.top_score is not None \
                and result.floor is not None:
            return t("refused_unanswerable_scored", lang, **numbers)
        case Status.REFUSED_UNANSWERABLE | Status.REFUSED_UNGROUNDED:
            key = result.status.value.replace("-", "_")
            return _with_scores(t(key, lang), result.top_score, result.floor, lang)
        case Status.REFUSED_BAD_INPUT:
            return t("bad_input", lang)
        case _:
            return t("error", lang)


def _with_scores(text: str, score: float | None, floor: float | None, lang: str) -> str:
    """``text`` and the score line ("Best match 0.861, floor 0.840.") when both are known."""
    if score is None or floor is None:
        return text
    return text + " " + t("score_line", lang, **_score_and_floor(score, floor))


def _limits(reason: Reason) -> dict[str, str]:
    """The limits a speech refusal states, formatted as its message expects (``20``, ``60``)."""
    limits = {"max_s": reason.max_s, "max_mb": reason.max_mb}
    return {name: f"{value:g}" for name, value in limits.items() if value is not None}


def _score_and_floor(score: float | None, floor: float | None) -> dict[str, str]:
    """``{"score": …, "floor": …}`` for a message that states both: written by
    :func:`rag.numbers.side_by_side` when both are known, so the written numbers compare as the
    numbers do ("0.8496" below "0.850", never "0.850" below "0.850"); else each at three
    decimals, ``n/a`` when unknown."""
    if score is not None and floor is not None:
        score_text, floor_text = side_by_side(score, floor)
        return {"score": score_text, "floor": floor_text}
    return {"score": _fmt(score), "floor": _fmt(floor)}


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _percent(probability: float | None) -> str:
    """A probability in [0, 1] as whole percent (``"68"``), ``"n/a"`` when unknown."""
    return "n/a" if probability is None else f"{100 * probability:.0f}"
