"""Structured logs: one JSON object per line, with the application and any ``extra`` fields.

Fields such as ``task`` and ``partition`` are passed with ``extra=`` at the call site, so
log pipelines can filter one task's story without parsing prose.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

import orjson

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def __init__(self, application_id: str, member: str | None = None) -> None:
        super().__init__()
        self.application_id = application_id
        self.member = member  # which of a pod's processes speaks, when there are several

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "app": self.application_id,
            "msg": record.getMessage(),
        }
        if self.member is not None:
            out["member"] = self.member
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


def setup(application_id: str, level: int = logging.INFO, member: str | None = None) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(application_id, member))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # kafka-python (group membership) narrates every connection at INFO: keep its group
    # coordinator's story (joins, generations, rebalances) and only the warnings of the rest
    if not os.environ.get("BATON_DEBUG_KAFKA"):
        logging.getLogger("kafka").setLevel(max(level, logging.WARNING))
        logging.getLogger("kafka.coordinator").setLevel(level)
