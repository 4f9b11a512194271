"""Background tasks that stop when told to, and shutdowns that cannot hang.

Every loop that runs until cancelled (the shared-state prune, the inbox sweep, lease renewal, a
chat's drain, the Telegram "typing" loop) catches its driver's errors to try again later. A
cancellation can arrive as one of those errors: when psycopg is cancelled mid-query it asks the
server to cancel too, and where the server does not answer within psycopg's 5 s it closes the
connection, so the transaction's rollback then fails with ``OperationalError``, which replaces
the ``CancelledError``. A loop that logged that and slept would run forever after its owner had
cancelled it, and an owner awaiting it would wait forever (issue 30: CI stalled for nine
minutes in ``Services.close()``). So:

- a loop calls :func:`raise_if_cancelled` in each ``except`` that goes on looping: the task's
  ``cancelling()`` count says it was asked to stop, whatever the exception became;
- an owner stops its tasks with :func:`stop_tasks`, which waits at most a bounded time, logs
  every task still running then (``task_abandoned``) and returns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

log = logging.getLogger(__name__)

STOP_WAIT_S = 1.0
"""Seconds :func:`stop_tasks` waits by default for cancelled background loops to end. A loop
ends on its next ``await`` once cancelled, within milliseconds, except inside a database call
that psycopg is cancelling on the server (up to 5 s, psycopg's own bound); such a task is
abandoned, logged, and ends by itself later. One second keeps every close well inside the 2 s
that issue 30 sets."""


def raise_if_cancelled() -> None:
    """Raise ``CancelledError`` when the running task has been asked to stop (see the module);
    call it in an ``except`` clause that would otherwise go on looping."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def stop_tasks(tasks: Iterable[asyncio.Task | None], what: str,
                     timeout_s: float = STOP_WAIT_S) -> list[asyncio.Task]:
    """Cancel ``tasks`` (None entries skipped), wait at most ``timeout_s`` seconds for them to
    end, log each one still running (``task_abandoned what=<what>``) and return those.

    Never raises for the tasks' own errors (a task that failed was logged by its loop), and
    never waits longer than ``timeout_s``, so a shutdown built from it is bounded."""
    running = [task for task in tasks if task is not None and not task.done()]
    for task in running:
        task.cancel()
    if not running:
        return []
    _, pending = await asyncio.wait(running, timeout=timeout_s)
    for task in pending:
        log.warning("task_abandoned what=%s task=%s waited_s=%.1f", what, task.get_name(),
                    timeout_s)
    for task in running:  # every outcome retrieved, now or when it ends: none "never retrieved"
        task.add_done_callback(_retrieve)
    return list(pending)


def _retrieve(task: asyncio.Task) -> None:
    if not task.cancelled():
        task.exception()
