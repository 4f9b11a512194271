"""The dashboard's aiohttp application: routes, access control, rendering.

    /                   recent questions, filterable (``bot.dashboard.query``), paginated
    /decision/{id}      one decision's chain (the /why stages with milliseconds), its citations
    /refusals           refusals by reason and language per day
    /scores             top-1 score distribution per language, floor drawn (inline SVG)
    /latency            latency percentiles per stage; speech-to-text and text-to-speech failures
    /export/refused.csv refused questions with their best passage and score
    /metrics            Prometheus text format (``bot.dashboard.metrics``)

Every page reads the database (the bot's SQLite file, or the PostgreSQL database replicas share)
through one read-only :class:`storage.reader.DecisionReader`, opened at start-up and closed at
clean-up. A bad query parameter is answered 400 with what is
allowed; an unexpected failure 500 with a one-line message (the traceback goes to the log).
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
import logging
import secrets
import time
from base64 import b64decode
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from urllib.parse import urlencode

import jinja2
from aiohttp import web
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from rag.types import LANGUAGES
from storage.backend import DatabaseUrl
from storage.db import SOURCES
from storage.reader import CHANNELS, DecisionReader

from .charts import score_histogram_svg
from .metrics import render_metrics
from .query import FILTER_KEYS, STATUSES, BadQuery, decision_filter, positive_int
from .settings import DashboardSettings
from .stats import histogram, stage_latencies
from .timings import StageTimings

log = logging.getLogger(__name__)

TEMPLATES = Path(__file__).resolve().parent / "templates"
COOKIE = "voice_rag_dashboard"
SETTINGS = web.AppKey("settings", DashboardSettings)
READER = web.AppKey("reader", DecisionReader)
DATABASE = web.AppKey("database", DatabaseUrl)
GUARD = web.AppKey("guard", "AccessGuard")
PAGES = web.AppKey("pages", jinja2.Environment)
PASSAGES = web.AppKey("passages", dict)
TIMINGS = web.AppKey("timings", StageTimings)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class AccessGuard:
    """Who may read the dashboard. When ``is_required`` (exposed beyond loopback, or credentials
    configured), a request needs ``Authorization: Bearer <token>``, the cookie set after
    ``?token=<token>``, or ``Authorization: Basic`` with the configured user and password."""

    def __init__(self, settings: DashboardSettings, is_exposed: bool) -> None:
        settings.check_exposure(is_exposed)
        self.settings = settings
        self.is_required = is_exposed or settings.has_credentials
        key = settings.hash_key or settings.token or secrets.token_hex(16)
        self._id_key = key.encode()
        self._cookie = (hmac.new(settings.token.encode(), b"dashboard-cookie", hashlib.sha256)
                        .hexdigest() if settings.token else None)

    def is_token(self, value: str) -> bool:
        return bool(self.settings.token) and hmac.compare_digest(
            value.encode(), self.settings.token.encode())

    def cookie_value(self) -> str:
        assert self._cookie is not None
        return self._cookie

    def is_allowed(self, request: web.Request) -> bool:
        if not self.is_required:
            return True
        header = request.headers.get("Authorization", "")
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() == "bearer" and self.is_token(credentials.strip()):
            return True
        if scheme.lower() == "basic" and self.settings.user and self._is_basic(credentials):
            return True
        cookie = request.cookies.get(COOKIE)
        return bool(cookie and self._cookie and hmac.compare_digest(cookie, self._cookie))

    def _is_basic(self, credentials: str) -> bool:
        try:
            user, _, password = b64decode(credentials.strip(), validate=True).decode().partition(
                ":")
        except (ValueError, UnicodeDecodeError):
            return False
        return (hmac.compare_digest(user.encode(), self.settings.user.encode())
                and hmac.compare_digest(password.encode(), self.settings.password.encode()))

    def chat(self, chat_id: int | None) -> str:
        """How a chat or user id is shown: the number, or with ``hash_ids`` 10 hex digits of
        its HMAC-SHA256 (the same id always gives the same digits while the key is kept)."""
        if chat_id is None:
            return "-"
        if not self.settings.hash_ids:
            return str(chat_id)
        return hmac.new(self._id_key, str(chat_id).encode(), hashlib.sha256).hexdigest()[:10]


def create_app(settings: DashboardSettings, *, is_exposed: bool | None = None) -> web.Application:
    """The dashboard as an aiohttp application, standalone or for ``add_subapp(prefix, ...)``.

    ``is_exposed``: whether it can be reached beyond this machine (default: ``settings.host``
    is not loopback). Pass True when mounting it in a server bound elsewhere (the WhatsApp
    webhook binds 0.0.0.0).

    Raises:
        DashboardConfigError: exposed without a token or user and password, or a database URL
            of another scheme than sqlite or postgresql.
    """
    guard = AccessGuard(settings, not settings.is_loopback if is_exposed is None else is_exposed)
    app = web.Application(middlewares=[_errors, _access])
    app[SETTINGS], app[GUARD] = settings, guard
    app[DATABASE] = settings.database  # a malformed URL fails here, not at start-up
    app[PAGES] = _environment()
    app[PASSAGES] = {}
    app[TIMINGS] = StageTimings()
    app.on_startup.append(_open_reader)
    app.on_cleanup.append(_close_reader)
    app.on_response_prepare.append(_security_headers)
    app.router.add_get("/", questions, name="questions")
    app.router.add_get("/decision/{id}", decision, name="decision")
    app.router.add_get("/refusals", refusals, name="refusals")
    app.router.add_get("/scores", scores, name="scores")
    app.router.add_get("/latency", latency, name="latency")
    app.router.add_get("/export/refused.csv", export_refused, name="export")
    app.router.add_get("/metrics", metrics, name="metrics")
    return app


# ---------------------------------------------------------------------------------- pages


async def questions(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    where = decision_filter(request.query, settings.page_size, settings.max_page_size)
    page = await request.app[READER].decisions(where)
    active = {k: request.query.get(k, "").strip() for k in FILTER_KEYS}
    active = {k: v for k, v in active.items() if v}
    if where.per != settings.page_size:
        active["per"] = str(where.per)
    return _render(request, "questions.html", page=page, active=active,
                   choices={"status": STATUSES, "lang": LANGUAGES, "channel": CHANNELS,
                            "source": SOURCES})


async def decision(request: web.Request) -> web.Response:
    _only(request.query, ())
    raw = request.match_info["id"]
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise BadQuery(f"decision id must be a whole number, got {raw[:40]!r}")
    found = await request.app[READER].decision(int(raw))
    if found is None:
        raise web.HTTPNotFound(text=f"no decision with id {int(raw)}")
    row, stored = found
    return _render(request, "decision.html", row=row, stored=stored,
                   reason=stored.result.reason.to_dict() if stored.result.reason else None)


async def refusals(request: web.Request) -> web.Response:
    _only(request.query, ("days",))
    days = positive_int(request.query, "days", 14, 366)
    counts = await request.app[READER].refusals_per_day(days)
    by_day: dict[str, list] = defaultdict(list)
    for c in counts:
        by_day[c.day].append(c)
    return _render(request, "refusals.html", by_day=by_day, days=days,
                   totals={day: sum(c.n for c in rows) for day, rows in by_day.items()})


async def scores(request: web.Request) -> web.Response:
    _only(request.query, ())
    values, floors = await request.app[READER].top_scores()
    order = [lang for lang in LANGUAGES if lang in values] + sorted(set(values) - set(LANGUAGES))
    charts = []
    for lang in order:
        floor = floors.get(lang)
        n_below = sum(v < floor for v in values[lang]) if floor is not None else 0
        charts.append({"lang": lang, "n": len(values[lang]), "n_below": n_below, "floor": floor,
                       "svg": score_histogram_svg(lang, histogram(values[lang], floor), floor)})
    return _render(request, "scores.html", charts=charts)


async def latency(request: web.Request) -> web.Response:
    _only(request.query, ())
    reader = request.app[READER]
    stages = stage_latencies(await request.app[TIMINGS].all(reader))
    failures = await reader.speech_failures()
    return _render(request, "latency.html", stages=stages, failures=failures[:50],
                   n_failures={s: sum(f.service == s for f in failures) for s in ("stt", "tts")})


async def export_refused(request: web.Request) -> web.Response:
    _only(request.query, ())
    rows = await request.app[READER].refused_questions()
    texts = _passage_texts(request.app)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["decision_id", "created_at", "channel", "lang", "status", "reason",
                     "question", "top_score", "floor", "best_passage_id", "best_score",
                     "best_passage_text", "detail"])
    for r in rows:
        writer.writerow([r.decision_id, r.created_at.isoformat(), r.channel, r.lang, r.status,
                         r.reason, _cell(r.query), _num(r.top_score), _num(r.floor),
                         r.best_passage_id or "", _num(r.best_score),
                         _cell(texts.get(r.best_passage_id or "", "")), _cell(r.message)])
    return web.Response(
        body=out.getvalue().encode("utf-8"), content_type="text/csv", charset="utf-8",
        headers={"Content-Disposition": 'attachment; filename="refused-questions.csv"'})


async def metrics(request: web.Request) -> web.Response:
    _only(request.query, ())
    reader = request.app[READER]
    body = await render_metrics(reader, await request.app[TIMINGS].all(reader))
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


# ------------------------------------------------------------------------------ plumbing


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """400 for a :class:`BadQuery`; 500 with one line, never a traceback, for anything else."""
    try:
        return await handler(request)
    except BadQuery as exc:
        log.info("dashboard_bad_query path=%s detail=%s", request.path, exc)
        return _render(request, "error.html", status=400, title="Bad request", message=str(exc))
    except web.HTTPException:
        raise
    except Exception:
        log.exception("dashboard_error path=%s", request.path)
        return web.Response(status=500, text="internal error: the dashboard's log has the "
                            "details")


@web.middleware
async def _access(request: web.Request, handler: Handler) -> web.StreamResponse:
    """401 unless :class:`AccessGuard` allows the request; ``?token=`` sets the cookie and
    redirects to the same page without it (so it stays out of history and logs)."""
    guard = request.app[GUARD]
    if not guard.is_required:
        return await handler(request)
    token = request.query.get("token")
    if token is not None and guard.is_token(token):
        query = {k: v for k, v in request.query.items() if k != "token"}
        location = request.path + (f"?{urlencode(query)}" if query else "")
        response = web.HTTPSeeOther(location)
        response.set_cookie(COOKIE, guard.cookie_value(), path=_prefix(request), httponly=True,
                            samesite="Strict", secure=request.secure)
        raise response
    if guard.is_allowed(request):
        return await handler(request)
    log.info("dashboard_unauthorized path=%s peer=%s", request.path, request.remote)
    challenge = ('Basic realm="voice-rag dashboard", charset="UTF-8"'
                 if guard.settings.user else 'Bearer realm="voice-rag dashboard"')
    return web.Response(status=401, text="401: a token (Authorization: Bearer, or ?token=) or "
                        "the dashboard's user and password is required",
                        headers={"WWW-Authenticate": challenge})


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.setdefault("Content-Security-Policy", "default-src 'none'; style-src "
                                "'unsafe-inline'; img-src 'self' data:; form-action 'self'")
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    response.headers.setdefault("Cache-Control", "no-store")


async def _open_reader(app: web.Application) -> None:
    app[READER] = await DecisionReader.open(app[DATABASE])


async def _close_reader(app: web.Application) -> None:
    if READER in app:
        await app[READER].close()


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             autoescape=jinja2.select_autoescape(["html"]),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["score"] = lambda v: "–" if v is None else f"{v:.3f}"
    env.filters["ms"] = lambda v: "–" if v is None else f"{v:.1f}"
    env.filters["when"] = lambda d: d.strftime("%Y-%m-%d %H:%M:%S")
    env.filters["clip"] = lambda s, n=160: s if len(s) <= n else s[: n - 1] + "…"
    return env


def _render(request: web.Request, template: str, status: int = 200,
            **context: object) -> web.Response:
    app = request.app
    guard = app[GUARD]

    def url(name: str, query: Mapping[str, str] | None = None, **parts: object) -> str:
        path = str(app.router[name].url_for(**{k: str(v) for k, v in parts.items()}))
        return path + (f"?{urlencode(query)}" if query else "")

    started = time.perf_counter()
    html = app[PAGES].get_template(template).render(
        url=url, chat=guard.chat, request_path=request.path, **context)
    log.debug("dashboard_render template=%s render_ms=%.1f", template,
              (time.perf_counter() - started) * 1000)
    return web.Response(text=html, content_type="text/html", status=status)


def _only(query: Mapping[str, str], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(query) - set(allowed))
    if unknown:
        takes = f"takes only {', '.join(allowed)}" if allowed else "takes no query parameters"
        raise BadQuery(f"unknown query parameter {unknown[0]!r}; this page {takes}")


def _prefix(request: web.Request) -> str:
    """The path the dashboard is mounted at (``/`` standalone, ``/dashboard`` as a sub-app)."""
    return str(request.app.router["questions"].url_for()).rstrip("/") or "/"


def _cell(text: str) -> str:
    """User text for a spreadsheet cell: a leading ``=``, ``+``, ``-``, ``@``, tab or carriage
    return gets a ``'`` before it, so a question such as ``=HYPERLINK(...)`` is shown, not run
    as a formula (OWASP's advice on CSV injection)."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def _passage_texts(app: web.Application) -> dict[str, str]:
    """Passage id → text from ``settings.index_dir/passages.jsonl``, read once; empty when the
    index is not there (the export then has ids and scores only)."""
    cache = app[PASSAGES]
    if "loaded" not in cache:
        cache["loaded"], cache["texts"] = True, {}
        path = app[SETTINGS].index_dir / "passages.jsonl"
        try:
            with path.open(encoding="utf-8") as fh:
                rows = (json.loads(line) for line in fh if line.strip())
                cache["texts"] = {p["id"]: p["text"] for p in rows}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.info("dashboard_no_passages path=%s detail=%s", path, exc)
    return cache["texts"]
