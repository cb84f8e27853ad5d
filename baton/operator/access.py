"""Does the operator hold, in each namespace it watches, the rights ``core/rbac.py`` says it needs?

Why ask at start: an operator told to watch a namespace its RBAC does not cover (a namespace
added to ``--namespace`` but not to the chart's ``operator.watchNamespaces``) otherwise runs
and logs a 403 per watch and per write, and the apps there sit without status. Asked once,
the API server's own answer (a SelfSubjectRulesReview per namespace) names the namespace and
what is missing, and the operator stops with that message instead.

:func:`missing` is pure (the rules granted against the rules needed); :func:`check` asks.
"""

from __future__ import annotations

from typing import Any

from baton.operator.core import rbac


def _grants(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    def has(values: list[str] | None, value: str) -> bool:
        return bool(values) and ("*" in values or value in values)  # type: ignore[operator]

    return any(
        has(r.get("apiGroups"), group) and has(r.get("resources"), resource) and has(r.get("verbs"), verb)
        for r in rules
    )


def missing(granted: list[dict[str, Any]], needed: list[dict[str, Any]]) -> list[str]:
    """``verb resource.group`` of each needed right no granted rule covers (pure)."""
    out = []
    for rule in needed:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    if not _grants(granted, group, resource, verb):
                        out.append(f"{verb} {resource}{'.' + group if group else ''}")
    return out


def check(api: Any, namespaces: list[str]) -> dict[str, list[str]]:
    """Namespace -> the rights the operator lacks there, for each watched namespace that lacks any."""
    from kubernetes import client

    authz = client.AuthorizationV1Api(api)
    out: dict[str, list[str]] = {}
    for namespace in namespaces:
        review = authz.create_self_subject_rules_review(
            client.V1SelfSubjectRulesReview(spec=client.V1SelfSubjectRulesReviewSpec(namespace=namespace))
        )
        status = review.status
        if (
            status is None or status.incomplete
        ):  # an authorizer that cannot list rules: the API server decides later
            continue
        granted = [
            {"apiGroups": r.api_groups, "resources": r.resources, "verbs": r.verbs}
            for r in status.resource_rules or []
        ]
        lacking = missing(granted, rbac.namespaced_rules())
        if lacking:
            out[namespace] = lacking
    return out


def refusal(lacking: dict[str, list[str]]) -> str:
    """What the operator says when it stops: which namespaces, what is missing, what to do (pure)."""
    parts = [
        f"{ns} (it may not {', '.join(rights[:4])}{' and more' if len(rights) > 4 else ''})"
        for ns, rights in sorted(lacking.items())
    ]
    return (
        f"the operator's RBAC does not cover namespace(s) {'; '.join(parts)}: add them to the chart's "
        "operator.watchNamespaces (which makes a Role there), or stop watching them (--namespace)"
    )
