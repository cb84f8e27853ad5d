"""What the operator tests count as a refused API call in the operator's log (tests/support/operator.py)."""

from tests.support.operator import refused_calls


def test_a_log_line_s_milliseconds_are_not_a_403() -> None:
    # test_chart_install failed once on "14:18:45,403": the regex then allowed a comma before 403
    log = "2026-11-26 14:18:45,403 INFO kopf: started\nresourceVersion 14030\nlease vm_403x\nlease a.403"
    assert refused_calls(log) == []


def test_refusals_are_found() -> None:
    lines = ["HTTP 403 on GET /apis/baton.dev/v1", "(403)", "reason: Forbidden", "status=403"]
    assert refused_calls("\n".join(["ok", *lines])) == lines
