"""Sessionize page views: `page-views` (key user id, JSON view) -> `page-view-sessions` (one record per session).

A session is a user's views with less than 30 minutes between them (the gap); it closes
when stream time passes its last view plus the gap plus 5 minutes of grace for views
that arrive late, and only then is it written, once, with its final numbers
(``suppress(until_window_closes())``). Event time comes from the view's own
``timestamp`` field (the timestamp extractor), not from when Kafka received it.

Run it: baton run examples/page_views.py --bootstrap-servers localhost:9092 --application-id page-views
(PAGE_VIEWS_TOPIC, SESSIONS_TOPIC, SESSION_GAP_MS and SESSION_GRACE_MS override the
defaults, e.g. in tests.)
"""

import os
from typing import Any

from pydantic import BaseModel, ConfigDict

from baton import JSON, STR, Json, Topology, Windowed, sessions, until_window_closes


class PageView(BaseModel):
    model_config = ConfigDict(strict=True)
    user_id: str
    page: str
    timestamp: int  # ms since the epoch, when the browser showed the page


GAP_MS = int(os.environ.get("SESSION_GAP_MS", str(30 * 60 * 1000)))
GRACE_MS = int(os.environ.get("SESSION_GRACE_MS", str(5 * 60 * 1000)))


def add_view(_user: str, view: PageView, session: dict[str, Any]) -> dict[str, Any]:
    return {"views": session["views"] + 1, "pages": sorted({*session["pages"], view.page})}


def merge(_user: str, older: dict[str, Any], newer: dict[str, Any]) -> dict[str, Any]:
    """A late view that falls between two sessions joins them into one."""
    return {"views": older["views"] + newer["views"], "pages": sorted({*older["pages"], *newer["pages"]})}


def session_record(window: Windowed[str], session: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return window.key, {"user_id": window.key, "start": window.start, "end": window.end, **session}


topology = Topology()
(
    topology.stream(
        os.environ.get("PAGE_VIEWS_TOPIC", "page-views"),
        key=STR,
        value=Json(PageView),
        timestamp=lambda _user, view, _record_ts: view.timestamp,
    )
    .group_by_key()
    .windowed_by(sessions(GAP_MS, grace=GRACE_MS))
    .aggregate(lambda: {"views": 0, "pages": []}, add_view, merger=merge, store="sessions")
    .suppress(until_window_closes())
    .to_stream()
    .map(session_record, key=STR)
    .to(os.environ.get("SESSIONS_TOPIC", "page-view-sessions"), value=JSON)
)
