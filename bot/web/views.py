"""What the web page shows of one reply, built once when the message is answered and kept in the
database (``storage.web_exchanges``, column ``view``) as JSON, so a restart or another replica
shows the same page. Pure: no I/O.

A view (:class:`ReplyView`) holds the reply's kind (confident, hedged, refused, error: the
decision's ``rag.types.Status``; None for a command or a notice), the language it is written in
(``bot.chat.types.Reply.lang``), the messages as channel-neutral :class:`bot.chat.render.Text`,
the sources as a person reads them (:class:`SourceView`: the passage's language, its opening
words, the whole passage) and the "Why?" (:class:`WhyView`: the decision in plain words, then
the stage table). :func:`page_exchange` turns a stored exchange into what the template shows,
every span escaped.
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from markupsafe import Markup as SafeHtml

from bot.chat.messages import language_name
from bot.chat.render import (
    WHY_DETAIL_CHARS,
    Markup,
    Span,
    Text,
    render_result,
    why_summary,
)
from rag.language import script_language
from rag.text import excerpt
from rag.types import Citation, Result, Stage, Status
from storage.web_exchanges import StoredExchange

VIEW_VERSION = 1
"""Version of the stored JSON; a view of another version is shown as its question alone."""
OPENING_CHARS = 160
"""A source's opening words shown before "Show the whole passage", in characters (about 25
English words; a passage of the corpus is typically 300-1,000 characters)."""
SHOWN_QUESTION_CHARS = 1200
"""Longest question shown above its reply, in characters (whitespace folded): past the input
guard's 1,000 (``RagSettings.max_query_chars``), so that a cut question shows it was cut."""

HTML = Markup(html.escape, lambda s: f"<strong>{s}</strong>", lambda s: f"<em>{s}</em>",
              lambda s: f"<code>{s}</code>")
"""The chat layer's text as HTML, every span escaped (line breaks kept by the page's CSS)."""

Kind = Literal["confident", "hedged", "refused", "error"]


def kind_of(status: Status | None) -> Kind | None:
    """How the page labels a decision: ``confident`` (``Status.ANSWERED``), ``hedged``,
    ``refused`` (any ``refused-*``), ``error``; None without a decision (a command)."""
    if status is None:
        return None
    if status is Status.ANSWERED:
        return "confident"
    if status is Status.HEDGED:
        return "hedged"
    return "refused" if status.is_refusal else "error"


@dataclass(frozen=True, slots=True)
class SourceView:
    """One cited passage: its number in the answer's marks (``n``), ``passage_id``, language
    code ``lang``, cosine ``score`` to 3 decimals, ``opening`` (its first words) and ``text``
    (the whole passage; the citation's excerpt where the index no longer has it)."""

    n: int
    passage_id: str
    lang: str
    score: str
    opening: str
    text: str

    @property
    def is_whole(self) -> bool:
        """The opening words are the whole passage (no control to show more)."""
        return self.opening == " ".join(self.text.split())


@dataclass(frozen=True, slots=True)
class WhyView:
    """The decision in ``summary`` (one paragraph, plain words, the reply's language), then
    ``stages``: (name, decision, detail cut to ``WHY_DETAIL_CHARS``, elapsed ms) in order."""

    summary: str
    stages: list[tuple[str, str, str, float]]


@dataclass(slots=True)
class ReplyView:
    """What the page shows of one reply (see the module); ``heard`` is the transcript a voice
    note was answered from (None for typed text or when nothing was heard)."""

    kind: Kind | None = None
    lang: str | None = None
    decision_id: int | None = None
    replies: list[Text] = field(default_factory=list)
    heard: str | None = None
    sources: list[SourceView] = field(default_factory=list)
    why: WhyView | None = None

    def to_json(self) -> str:
        data = {"v": VIEW_VERSION, "kind": self.kind, "lang": self.lang,
                "decision_id": self.decision_id, "heard": self.heard,
                "replies": [[[s.text, s.style] for s in text.spans] for text in self.replies],
                "sources": [asdict(s) for s in self.sources],
                "why": None if self.why is None else asdict(self.why)}
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str | None) -> ReplyView | None:
        """The view stored as ``raw``; None for none or another version."""
        data = json.loads(raw) if raw else None
        if not isinstance(data, dict) or data.get("v") != VIEW_VERSION:
            return None
        why = data.get("why")
        return cls(
            kind=data.get("kind"), lang=data.get("lang"), decision_id=data.get("decision_id"),
            replies=[Text(tuple(Span(text, style) for text, style in spans))
                     for spans in data.get("replies", [])],
            heard=data.get("heard"),
            sources=[SourceView(**s) for s in data.get("sources", [])],
            why=None if why is None else WhyView(why["summary"],
                                                 [tuple(s) for s in why["stages"]]))


def decided_view(result: Result, lang: str, decision_id: int, transcript: str | None,
                 passages: dict[str, str]) -> ReplyView:
    """The view of a decision's reply in ``lang`` (the reply's language): the reply as every
    channel words it but without its sources (``render_result(with_sources=False)``; the
    transcript is shown with the question instead), the sources with their whole text
    (``passages``: passage id -> text, from the index), and the "Why?" from the decision's
    trace as stored (the spoken reply's stages included)."""
    reply = render_result(result, lang, with_sources=False)
    stages = stage_rows(result.trace.stages)
    return ReplyView(
        kind=kind_of(result.status), lang=lang, decision_id=decision_id, replies=[reply],
        heard=transcript or None,
        sources=[source_view(n, c, passages.get(c.passage_id))
                 for n, c in enumerate(result.citations, start=1)],
        why=WhyView(why_summary(result, lang), stages))


def source_view(n: int, citation: Citation, passage_text: str | None) -> SourceView:
    """Source ``n`` as a person reads it; ``passage_text`` None: the citation's excerpt."""
    text = passage_text or citation.excerpt
    return SourceView(n, citation.passage_id, citation.lang, f"{citation.score:.3f}",
                      excerpt(text, OPENING_CHARS), text)


def page_exchange(stored: StoredExchange, page_lang: str) -> dict[str, Any]:
    """What the template shows of ``stored`` (HTML of the replies already escaped), labelled in
    its reply's language, else ``page_lang``."""
    view = ReplyView.from_json(stored.view) or ReplyView()
    lang = view.lang or page_lang
    question = view.heard if stored.is_voice and view.heard else stored.question
    shown = excerpt(question, SHOWN_QUESTION_CHARS)
    return {
        "msg": stored.key.partition(":")[2], "question": shown,
        "question_lang": script_language(shown), "is_voice": stored.is_voice,
        "kind": view.kind, "lang": lang, "is_done": stored.is_done,
        "decision_id": view.decision_id,
        "replies": [SafeHtml(HTML.render(text)) for text in view.replies],
        "sources": [{**asdict(s), "is_whole": s.is_whole,
                     "language": language_name(s.lang, lang)} for s in view.sources],
        "why": view.why, "voice_s": stored.voice_s,
    }


def stage_rows(stages: list[Stage]) -> list[tuple[str, str, str, float]]:
    """A trace's stages as the "Why?" table's rows (detail cut to ``WHY_DETAIL_CHARS``)."""
    return [(s.name, s.decision, excerpt(s.detail, WHY_DETAIL_CHARS), round(s.elapsed_ms, 1))
            for s in stages]
