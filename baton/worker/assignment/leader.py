"""The group leader's assignment: the members' subscriptions in, their assignments out.

kafka-python asks the leader for the group's assignment (``membership.TaskAssignor``). This
decodes what each member reports (its process, host, zone, and how far its stores are
behind), finds each task's partitions, runs Baton's assignor (``assignor.py``, pure) and
encodes each member's roles. It stages the move cooperatively: a task another member still
runs is withheld from its new owner until released. No I/O: the changelog end offsets are
those the member thread read between polls, and the member's state stays in membership.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from baton.worker.assignment import assignor
from baton.worker.assignment.model import UNKNOWN_LAG, MemberReport
from baton.worker.assignment.wire import RUNNING, BadUserData, Roles, Subscription
from baton.worker.naming import TaskId

if TYPE_CHECKING:
    from baton.worker.assignment.membership import TP, GroupSettings

log = logging.getLogger("baton.worker.membership")

# how long withheld actives may take to arrive before a member rebalances again (membership.py's
# follow-up); the leader names it when it assigns without some topics' partitions
FOLLOWUP_SECONDS = 3.0


def lags_from(
    reports: Mapping[str, Subscription],
    ends: Mapping[TP, int] | None,
    state_partitions: Callable[[TaskId], list[TP]],
    stateful: Collection[TaskId] = (),
) -> dict[str, dict[TaskId, int]]:
    """Member -> task -> changelog records behind, from offset sums and end offsets (pure).

    A member with no state for a stateful task is as far behind as the changelogs are long
    (Kafka Streams does the same): with short changelogs, as in a new app, everybody is
    caught up and nothing waits for a warmup. Without end offsets (the query failed), any
    reported state counts as caught up: moving a task to a member with some state beats
    restoring it from scratch elsewhere, and members without state stay unknown.
    """

    def total(task: TaskId) -> int | None:
        parts = state_partitions(task)
        if ends is None or any(tp not in ends for tp in parts):
            return None
        return sum(ends[tp] for tp in parts)

    out: dict[str, dict[TaskId, int]] = {}
    for member, report in reports.items():
        lags: dict[TaskId, int] = {}
        for task, offset in report.offsets.items():
            end = total(task)
            if offset == RUNNING:
                lags[task] = 0
            elif offset < 0:
                lags[task] = UNKNOWN_LAG
            elif ends is None:
                lags[task] = 0
            else:
                lags[task] = UNKNOWN_LAG if end is None else max(0, end - offset)
        for task in stateful:
            if task not in lags:
                end = total(task)
                if end is not None:
                    lags[task] = end
        out[member] = lags
    return out


def leader_assignment(
    settings: GroupSettings,
    cluster: Any,
    members: list[Any],
    cached_ends: Mapping[TP, int] | None,
    first: bool,
) -> tuple[dict[str, ConsumerProtocolAssignment], bool]:
    """Every member's assignment, by member id, from their subscriptions (``members``) and the
    input topics' partitions (``cluster``); and whether processes of the leader's own pod are
    missing from it, which matters on the leader's ``first`` assignment only (see
    ``Membership.assignment_received``). ``cached_ends``: the changelog end offsets the member
    thread last read (``Membership._refresh_ends``), None if never."""
    started = time.monotonic()
    s = settings
    reports: dict[str, Subscription] = {}
    for member in members:
        try:
            reports[member.member_id] = Subscription.decode(member.metadata.user_data)
        except (BadUserData, ValueError) as exc:
            log.warning(
                "member sent user data this worker cannot read; treating it as stateless",
                extra={"member": member.member_id, "error": str(exc)},
            )
            reports[member.member_id] = Subscription(process=member.member_id, host=member.member_id)
    partitions: dict[TaskId, list[TP]] = {}
    unknown: list[str] = []
    for topic, sub in sorted(s.topic_to_sub.items()):
        known = cluster.partitions_for_topic(topic)
        if not known:
            unknown.append(topic)
        for p in sorted(known or ()):
            partitions.setdefault(TaskId(sub, p), []).append((topic, p))
    if unknown:
        log.warning(
            "assigning without the partitions of some input topics; every member rejoins soon",
            extra={"group": s.group_id, "topics": unknown, "rejoin_after_s": FOLLOWUP_SECONDS},
        )
    tasks = set(partitions)
    stateful = {t for t in tasks if t.subtopology in s.stateful_subs}
    wanted = sorted({tp for t in stateful for tp in s.state_partitions(t)})
    ends = None if cached_ends is None else {tp: cached_ends[tp] for tp in wanted if tp in cached_ends}
    lags = lags_from(reports, ends, s.state_partitions, sorted(stateful))
    member_reports = [
        MemberReport(
            member_id=mid,
            process=r.process or mid,
            host=r.host or r.process or mid,
            lags=lags[mid],
            previous_active=r.active,
            previous_standby=r.standby,
            zone=r.zone,
            draining=r.draining,
        )
        for mid, r in reports.items()
    ]
    decided = assignor.assign(member_reports, tasks, stateful, s.assignor)
    # See Membership.assignment_received: a pod whose processes passed the join barrier together but
    # did not all make this generation (the coordinator closed it on the first JoinGroup).
    mates = sum(1 for r in reports.values() if r.host == s.host)
    pod_mates_missing = first and mates < s.pod_processes
    # cooperative staging: a task another member still runs is withheld from its new owner until released
    running = {t: mid for mid, r in sorted(reports.items()) for t in r.active}
    probe_after = s.probing_interval_ms if decided.probing else None
    out: dict[str, ConsumerProtocolAssignment] = {}
    endpoints: dict[str, frozenset[TaskId]] = {}
    for mid, r in sorted(reports.items()):
        if r.endpoint and mid in decided.members:
            endpoints[r.endpoint] = endpoints.get(r.endpoint, frozenset()) | decided.members[mid].active
    moving = sum(1 for mid, r in decided.members.items() for t in r.active if running.get(t, mid) != mid)
    for mid in reports:
        roles = decided.members.get(mid)
        active = roles.active if roles else frozenset()
        owned_now = [t for t in sorted(active) if running.get(t, mid) == mid]
        by_topic: dict[str, list[int]] = {}
        for task in owned_now:
            for topic, p in partitions[task]:
                by_topic.setdefault(topic, []).append(p)
        user = Roles(
            active=active,
            standby=roles.standby if roles else frozenset(),
            warmup=roles.warmup if roles else frozenset(),
            probe_after_ms=probe_after,
            coverage=decided.coverage,
            followup=moving > 0,
            incomplete=bool(unknown),
            endpoints=endpoints,
        )
        a_tp = ConsumerProtocolAssignment.TopicPartition
        out[mid] = ConsumerProtocolAssignment(
            version=0,
            assigned_partitions=[a_tp(topic=t, partitions=sorted(p)) for t, p in sorted(by_topic.items())],
            user_data=user.encode(),
        )
    log.info(
        "assignment computed",
        extra={
            "group": s.group_id,
            "members": len(reports),
            "tasks": len(tasks),
            "moving": moving,
            "warmups": sum(len(r.warmup) for r in decided.members.values()),
            "standbys": sum(len(r.standby) for r in decided.members.values()),
            "caught_up_standbys": decided.coverage.caught_up,
            "probing": decided.probing,
            "end_offsets": "unknown" if ends is None else len(ends),
            "seconds": round(time.monotonic() - started, 3),
        },
    )
    return out, pod_mates_missing
