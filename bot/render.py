"""Turn a :class:`rag.types.Result` or a trace into Telegram HTML messages or plain text. Pure:
no Telegram.

Users' words come from :mod:`bot.messages`, chosen by the result's typed ``reason`` and
``fallback`` and filled with their numbers; no text of another layer is parsed. In HTML, every
piece of text from outside (answers, passages, transcripts, trace details) goes through
``html.escape``; the only markup is ``<b>``, ``<i>`` and ``<code>``. Each returned HTML string
is at most 4096 characters (Telegram's message limit) and has balanced tags, so it can be sent
with ``parse_mode="HTML"`` as is. The plain-text rendering (console, CLI) has the same
paragraphs without markup.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from html import escape

from bot.messages import language_name, t
from rag.text import excerpt
from rag.types import Citation, Reason, ReasonCode, Result, Stage, Status, Trace

TELEGRAM_TEXT_LIMIT = 4096
"""Characters per message (Telegram counts after entity parsing; raw HTML is longer, so safe)."""
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

_UNIT_RE = re.compile(r"<[^<>]+>|&#?[A-Za-z0-9]+;|.", re.DOTALL)
_TAG_RE = re.compile(r"<[^<>]+>")
_TAG_NAME_RE = re.compile(r"<(/?)([A-Za-z][\w-]*)")


@dataclass(frozen=True, slots=True)
class Markup:
    """How rendered text is marked up: ``text`` makes outside text safe, the others wrap it."""

    text: Callable[[str], str]
    bold: Callable[[str], str]
    italic: Callable[[str], str]
    code: Callable[[str], str]


HTML = Markup(escape, "<b>{}</b>".format, "<i>{}</i>".format, "<code>{}</code>".format)
"""Telegram's ``parse_mode="HTML"``."""
PLAIN = Markup(str, str, str, str)
"""Terminal text: no markup, nothing escaped."""


def render_result(result: Result, lang: str, transcript: str | None = None) -> list[str]:
    """HTML messages for one question's outcome, in the user's language ``lang``.

    Paragraphs, in order: the transcript line (voice only, when ``transcript`` is given; cut to
    about ``TRANSCRIPT_CHARS``), then either the answer (with a low-confidence note when
    flagged, a note when the answer's passage is in another language, and one when generative
    mode fell back to the passage) followed by the cited passages (id, language, score to 3
    decimals, the citation's excerpt), or the refusal/error wording (:func:`refusal_text`).

    Returns:
        One or more messages, each at most ``TELEGRAM_TEXT_LIMIT`` characters with balanced
        tags (see :func:`split_message`).
    """
    return split_message("\n\n".join(_result_paragraphs(result, lang, transcript, HTML)))


def render_result_text(result: Result, lang: str, transcript: str | None = None) -> str:
    """The same paragraphs as :func:`render_result`, as plain text (console, CLI), unsplit."""
    return "\n\n".join(_result_paragraphs(result, lang, transcript, PLAIN))


def _result_paragraphs(result: Result, lang: str, transcript: str | None,
                       m: Markup) -> list[str]:
    parts: list[str] = []
    if transcript is not None:
        heard = excerpt(transcript, TRANSCRIPT_CHARS)
        parts.append(f"{m.italic(m.text(t('you_said', lang)))} {m.text(heard)}")
    if result.status is Status.ANSWERED:
        parts.extend(_answer_parts(result, lang, m))
    else:
        parts.append(m.text(refusal_text(result, lang)))
    return parts


def render_trace(stages: Trace | Iterable[Stage], lang: str, query: str | None = None) -> list[str]:
    """HTML for ``/why``: a header, the question (if given, cut to about ``WHY_QUERY_CHARS``),
    one line per stage ``name — decision: detail (elapsed ms to 1 decimal)`` (details cut to
    about ``WHY_DETAIL_CHARS``), then the total in ms.

    An empty trace gives the "nothing to explain yet" message.
    """
    stage_list = list(stages.stages if isinstance(stages, Trace) else stages)
    if not stage_list:
        return [escape(t("why_empty", lang))]
    lines = [f"<b>{escape(t('why_header', lang))}</b>"]
    if query:
        lines.append(escape(t("why_query", lang, query=excerpt(query, WHY_QUERY_CHARS))))
    for stage in stage_list:
        detail = excerpt(stage.detail, WHY_DETAIL_CHARS)
        detail = f": {escape(detail)}" if detail else ""
        lines.append(
            f"<code>{escape(stage.name)}</code> — {escape(stage.decision)}{detail} "
            f"({stage.elapsed_ms:.1f} ms)"
        )
    total_ms = sum(stage.elapsed_ms for stage in stage_list)
    lines.append(f"<b>{escape(t('why_total', lang))}</b>: {total_ms:.1f} ms")
    return split_message("\n".join(lines))


def _answer_parts(result: Result, lang: str, m: Markup) -> list[str]:
    parts = [m.text(result.answer.strip())]
    notes = []
    if result.is_low_confidence:
        notes.append(t("low_confidence", lang, score=_fmt(result.top_score),
                       floor=_fmt(result.floor)))
    if result.answer_lang and result.answer_lang != lang:
        notes.append(t("answer_from", lang, language=language_name(result.answer_lang, lang)))
    if result.fallback is not None:  # generative mode answered extractively
        reason = t(f"fallback_{result.fallback.kind}", lang)
        notes.append(t("generative_fallback", lang, reason=reason))
    parts.extend(m.italic(m.text(note)) for note in notes)
    if result.citations:
        lines = [m.bold(m.text(t("sources", lang)))]
        lines.extend(_citation(n, c, lang, m) for n, c in enumerate(result.citations, start=1))
        parts.append("\n".join(lines))
    return parts


def _citation(n: int, citation: Citation, lang: str, m: Markup) -> str:
    head = (
        f"{n}. {m.code(m.text(citation.passage_id))} · "
        f"{m.text(language_name(citation.lang, lang))} · "
        f"{m.text(t('score', lang))} {citation.score:.3f}"
    )
    return f"{head}\n{m.italic(m.text(citation.excerpt))}" if citation.excerpt else head


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
    score, floor = _fmt(reason.score), _fmt(reason.floor)
    match reason.code:
        case ReasonCode.TOO_LONG:
            return t("bad_input_too_long", lang, max_chars=reason.max_chars)
        case code if code in _BAD_INPUT_KEYS:
            return t(_BAD_INPUT_KEYS[code], lang)
        case ReasonCode.NO_PASSAGES:
            return t("refused_no_passages", lang, floor=floor)
        case ReasonCode.BELOW_FLOOR:
            return t("refused_no_match", lang, score=score, floor=floor)
        case ReasonCode.NOT_ANSWERABLE:
            # the gate refuses after the relevance guard passed: the score is above the floor
            return t("refused_unanswerable_scored", lang, score=score, floor=floor)
        case ReasonCode.NO_CANDIDATE | ReasonCode.UNGROUNDED:
            return _with_scores(t("refused_ungrounded", lang), reason.score, reason.floor, lang)
        case ReasonCode.SPEECH_REFUSED if reason.key:
            return t(reason.key, lang, **_limits(reason))
        case _:
            return t("error", lang)


def _status_text(result: Result, lang: str) -> str:
    """Wording of a result without a reason (rows stored before reasons were)."""
    score, floor = _fmt(result.top_score), _fmt(result.floor)
    match result.status:
        case Status.REFUSED_NO_MATCH if result.top_score is None:
            return t("refused_no_passages", lang, floor=floor)
        case Status.REFUSED_NO_MATCH:
            return t("refused_no_match", lang, score=score, floor=floor)
        case Status.REFUSED_UNANSWERABLE if result.top_score is not None \
                and result.floor is not None:
            return t("refused_unanswerable_scored", lang, score=score, floor=floor)
        case Status.REFUSED_UNANSWERABLE | Status.REFUSED_UNGROUNDED:
            key = result.status.value.replace("-", "_")
            return _with_scores(t(key, lang), result.top_score, result.floor, lang)
        case Status.REFUSED_BAD_INPUT:
            return t("bad_input", lang)
        case _:
            return t("error", lang)


def _with_scores(text: str, score: float | None, floor: float | None, lang: str) -> str:
    """``text`` and the score line ("best score 0.861, floor 0.840") when both are known."""
    if score is None or floor is None:
        return text
    return text + " " + t("score_line", lang, score=_fmt(score), floor=_fmt(floor))


def _limits(reason: Reason) -> dict[str, str]:
    """The limits a speech refusal states, formatted as its message expects (``20``, ``60``)."""
    limits = {"max_s": reason.max_s, "max_mb": reason.max_mb}
    return {name: f"{value:g}" for name, value in limits.items() if value is not None}


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


# ------------------------------------------------------------------ splitting


def split_message(html: str, limit: int = TELEGRAM_TEXT_LIMIT) -> list[str]:
    """Split Telegram HTML into chunks of at most ``limit`` characters.

    Cuts preferably at a paragraph break (blank line), then a line break, then a space, and
    only as a last resort between two characters; never inside a tag or an entity such as
    ``&amp;``. Tags open at a cut are closed at the end of the chunk and reopened at the start
    of the next, so every chunk is valid HTML on its own. Whitespace at the cut is dropped.

    Returns:
        Non-empty chunks, in order (``[]`` for blank input).
    Raises:
        ValueError: ``limit`` too small to hold the open tags plus one character.
    """
    units = _UNIT_RE.findall(html)
    chunks: list[str] = []
    stack: list[tuple[str, str]] = []  # (name, opening tag) open at the start of the chunk
    i = 0
    while i < len(units):
        while i < len(units) and units[i].isspace():
            i += 1
        if i == len(units):
            break
        prefix = "".join(raw for _, raw in stack)
        length = len(prefix)
        current = list(stack)
        breaks: dict[int, tuple[int, list[tuple[str, str]]]] = {}  # priority -> (cut, stack)
        j = i
        while j < len(units):
            after = _apply(current, units[j])
            closing = sum(len(name) + 3 for name, _ in after)
            if length + len(units[j]) + closing > limit:
                break
            length += len(units[j])
            current = after
            j += 1
            priority = _break_priority(units, j)
            if priority:
                breaks[priority] = (j, list(current))
        if j == len(units):
            cut, end_stack = j, current
        elif j == i:
            raise ValueError(f"limit {limit} cannot hold the open tags plus one character")
        else:
            cut, end_stack = _choose_break(breaks, i, j, current)
        body = "".join(units[i:cut]).rstrip()
        closing_tags = "".join(f"</{name}>" for name, _ in reversed(end_stack))
        chunk = prefix + body + closing_tags
        if _TAG_RE.sub("", chunk).strip():  # Telegram refuses a message with no text
            chunks.append(chunk)
        stack, i = end_stack, cut
    return chunks


def _apply(stack: list[tuple[str, str]], unit: str) -> list[tuple[str, str]]:
    """The open-tag stack after ``unit`` (tags are assumed well nested, as html.escape'd
    text with our own markup is)."""
    if not (unit.startswith("<") and unit.endswith(">") and len(unit) > 2):
        return stack
    match = _TAG_NAME_RE.match(unit)
    if match is None:
        return stack
    closing, name = match.group(1) == "/", match.group(2).lower()
    if not closing:
        return [*stack, (name, unit)]
    if stack and stack[-1][0] == name:
        return stack[:-1]
    return stack


def _break_priority(units: list[str], j: int) -> int:
    """How good a cut before ``units[j]`` is: 3 paragraph, 2 line, 1 space, 0 none."""
    last = units[j - 1]
    if last == "\n":
        return 3 if j >= 2 and units[j - 2] == "\n" else 2
    return 1 if last.isspace() else 0


def _choose_break(
    breaks: dict[int, tuple[int, list[tuple[str, str]]]], start: int, end: int,
    current: list[tuple[str, str]],
) -> tuple[int, list[tuple[str, str]]]:
    """The best cut: the strongest break that keeps the chunk at least half full, else the
    latest break of any kind, else a hard cut at ``end``."""
    half = start + (end - start) // 2
    for priority in (3, 2, 1):
        if priority in breaks and breaks[priority][0] >= half:
            return breaks[priority]
    if breaks:
        return max(breaks.values(), key=lambda b: b[0])
    return end, current
