"""The operator's dashboard: a read-only web view of the decision log, and ``/metrics``.

    python -m bot dashboard [--host 127.0.0.1 --port 8081 --db data/bot.sqlite3]

or, in a process that already serves aiohttp (the WhatsApp webhook)::

    app.add_subapp("/dashboard", create_app(DashboardSettings.from_env(), is_exposed=True))

Pages (``bot.dashboard.app``): recent questions with filters, one decision's chain, refusals per
day, top-score distribution, latency per stage and speech failures, a CSV of refused questions.
"""

from .app import create_app
from .settings import DashboardConfigError, DashboardSettings

__all__ = ["DashboardConfigError", "DashboardSettings", "create_app"]
