"""Turn a :class:`rag.types.Result` or a trace into Telegram HTML messages. Pure: no Telegram.

Every piece of text from outside (answers, passages, transcripts, trace details) goes through
``html.escape``; the only markup is ``<b>``, ``<i>`` and ``<code>``. Each returned string is at
most 4096 characters (Telegram's message limit) and has balanced tags, so it can be sent with
``parse_mode="HTML"`` as is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from html import escape

from bot.messages import language_name, t
from rag.text import excerpt
from rag.types import Citation, Result, Stage, Status, Trace

TELEGRAM_TEXT_LIMIT = 4096
"""Characters per message (Telegram counts after entity parsing; raw HTML is longer, so safe)."""
"""Longest passage excerpt shown under an answer, in characters (before escaping)."""
TRANSCRIPT_CHARS = 300
"""Longest transcript echoed above a voice answer ("You said: …"), in characters: enough for
any question the pipeline accepts to be recognisable, short of flooding the chat."""
WHY_QUERY_CHARS = 200
"""Longest question shown by ``/why``, in characters (before escaping): with the stage details
cut to ``WHY_DETAIL_CHARS``, a whole trace fits one message even after a 4,000-character
question."""
WHY_DETAIL_CHARS = 300
"""Longest stage detail shown by ``/why``, in characters (the longest the pipeline writes, three
hits with scores or a gate summary, are well under this; error texts can be longer)."""

_UNIT_RE = re.compile(r"<[^<>]+>|&#?[A-Za-z0-9]+;|.", re.DOTALL)
_TAG_RE = re.compile(r"<[^<>]+>")
_TAG_NAME_RE = re.compile(r"<(/?)([A-Za-z][\w-]*)")
_TOO_LONG_RE = re.compile(r"> ?(\d+)")


def render_result(result: Result, lang: str, transcript: str | None = None) -> list[str]:
    """HTML messages for one question's outcome, in the user's language ``lang``.

    Paragraphs, in order: the transcript line (voice only, when ``transcript`` is given; cut to
    about ``TRANSCRIPT_CHARS``), then either the answer (with a low-confidence note when
    flagged, a note when the answer's passage is in another language, and one when generative
    mode fell back to the passage) followed by the cited passages (id, language, score to 3
    decimals, the citation's excerpt), or the refusal/error wording;
    ``refused-no-match`` states the best score and the floor to 3 decimals, and
    ``refused-unanswerable`` that the closest passage (score above the floor) does not answer.

    Returns:
        One or more messages, each at most ``TELEGRAM_TEXT_LIMIT`` characters with balanced
        tags (see :func:`split_message`).
    """
    parts: list[str] = []
    if transcript is not None:
        heard = excerpt(transcript, TRANSCRIPT_CHARS)
        parts.append(f"<i>{escape(t('you_said', lang))}</i> {escape(heard)}")
    if result.status is Status.ANSWERED:
        parts.extend(_answer_parts(result, lang))
    else:
        parts.append(escape(_refusal_text(result, lang)))
    return split_message("\n\n".join(parts))


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


FALLBACK_REASONS = {
    "malformed": "fallback_malformed",
    "malformed_output": "fallback_malformed",
    "empty_answer": "fallback_unsupported",
    "no_valid_citations": "fallback_unsupported",
    "ungrounded": "fallback_unsupported",
    "wrong_language": "fallback_language",
}
"""User-facing kind of each rag.generative fallback code (the code itself shows in /why); any
other code (timeout, rate_limited, server_error, unauthorized, bad_request, network) is the
service being unavailable."""


def _answer_parts(result: Result, lang: str) -> list[str]:
    parts = [escape(result.answer.strip())]
    notes = []
    if result.is_low_confidence:
        notes.append(t("low_confidence", lang, score=_fmt(result.top_score),
                       floor=_fmt(result.floor)))
    if result.answer_lang and result.answer_lang != lang:
        notes.append(t("answer_from", lang, language=language_name(result.answer_lang, lang)))
    fallback = result.trace.get("fallback")
    if fallback is not None:  # generative mode answered extractively
        reason = t(FALLBACK_REASONS.get(fallback.decision, "fallback_service"), lang)
        notes.append(t("generative_fallback", lang, reason=reason))
    parts.extend(f"<i>{escape(note)}</i>" for note in notes)
    if result.citations:
        lines = [f"<b>{escape(t('sources', lang))}</b>"]
        lines.extend(_citation(n, c, lang) for n, c in enumerate(result.citations, start=1))
        parts.append("\n".join(lines))
    return parts


def _citation(n: int, citation: Citation, lang: str) -> str:
    head = (
        f"{n}. <code>{escape(citation.passage_id)}</code> · "
        f"{escape(language_name(citation.lang, lang))} · "
        f"{escape(t('score', lang))} {citation.score:.3f}"
    )
    return f"{head}\n<i>{escape(citation.excerpt)}</i>" if citation.excerpt else head


def refusal_text(result: Result, lang: str) -> str:
    """The refusal or error sentence the reply shows for ``result``, as plain text (not
    escaped) in ``lang``, with score and floor where it states them: what a spoken reply says."""
    return _refusal_text(result, lang)


def _refusal_text(result: Result, lang: str) -> str:
    score, floor = _fmt(result.top_score), _fmt(result.floor)
    match result.status:
        case Status.REFUSED_NO_MATCH if result.top_score is None:
            return t("refused_no_passages", lang, floor=floor)
        case Status.REFUSED_NO_MATCH:
            return t("refused_no_match", lang, score=score, floor=floor)
        case Status.REFUSED_UNANSWERABLE if result.top_score is not None \
                and result.floor is not None:
            # the gate refuses after the relevance guard passed: the score is above the floor
            return t("refused_unanswerable_scored", lang, score=score, floor=floor)
        case Status.REFUSED_UNANSWERABLE | Status.REFUSED_UNGROUNDED:
            key = result.status.value.replace("-", "_")
            text = t(key, lang)
            if result.top_score is not None and result.floor is not None:
                text += " " + t("score_line", lang, score=score, floor=floor)
            return text
        case Status.REFUSED_BAD_INPUT:
            return _bad_input_text(result.message, lang)
        case _:
            return t("error", lang)


def _bad_input_text(message: str, lang: str) -> str:
    """Word ``rag.pipeline``'s ``"bad input: {reason} ({detail})"`` for the user."""
    reason = message.removeprefix("bad input:").strip().split(" ", 1)[0]
    if reason == "too_long":
        limit = _TOO_LONG_RE.search(message)
        return t("bad_input_too_long", lang, max_chars=limit.group(1)) if limit \
            else t("bad_input", lang)
    if reason in ("empty", "too_short", "garbled", "unsupported_language"):
        return t(f"bad_input_{reason}", lang)
    return t("bad_input", lang)


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
