"""The whole group's assignment, learned with the AdminClient, refreshed in a thread of its own.

A member hears about rebalances only through its own callbacks, and under
cooperative-sticky a member whose partitions did not change gets no callback at all when
others come and go. Standby placement depends on everybody's assignment, so the watcher
describes the group periodically (every ``interval`` seconds) and at once when poked (the
runtime pokes it from every rebalance callback). Descriptions taken mid-rebalance are
skipped and retried shortly: only a ``Stable`` group's assignment is final.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import ConsumerGroupState, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._group import ConsumerGroupDescription

from baton.worker.standby_placement import Member

log = logging.getLogger(__name__)

RETRY_SECONDS = 0.5  # while the group is rebalancing


def members_from(description: ConsumerGroupDescription) -> list[Member] | None:
    """Members and their partitions, or None while the group is not stable (assignment in flux)."""
    if description.state != ConsumerGroupState.STABLE:
        return None
    out = []
    for m in description.members:
        partitions = tuple(sorted((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions or [])))
        out.append(Member(member_id=m.member_id, identity=m.group_instance_id or m.client_id, partitions=partitions))
    return out


class GroupWatcher(threading.Thread):
    """Calls ``on_members`` (in this thread) with each stable description of ``group_id``."""

    def __init__(self, admin_config: dict[str, Any], group_id: str, interval: float,
                 on_members: Callable[[list[Member]], None]) -> None:
        super().__init__(name="baton-group-watch", daemon=True)
        self._admin = AdminClient(admin_config)
        self._group = group_id
        self._interval = interval
        self._on_members = on_members
        self._wake = threading.Event()
        self._stopping = threading.Event()

    def poke(self) -> None:
        """Describe the group now (the membership just changed, as far as this member knows)."""
        self._wake.set()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    def run(self) -> None:
        wait = 0.0
        while not self._stopping.is_set():
            self._wake.wait(wait)
            self._wake.clear()
            if self._stopping.is_set():
                return
            members = self._describe()
            wait = self._interval if members is not None else RETRY_SECONDS
            if members is not None:
                try:
                    self._on_members(members)
                except Exception:  # a bad callback must not end the watch
                    log.exception("group view callback failed")

    def _describe(self) -> list[Member] | None:
        try:
            future = self._admin.describe_consumer_groups([self._group], request_timeout=10)[self._group]
            description: ConsumerGroupDescription = future.result(15)
        except (KafkaException, TimeoutError) as exc:
            log.info("describing the group failed; retrying", extra={"error": str(exc)})
            return None
        return members_from(description)
