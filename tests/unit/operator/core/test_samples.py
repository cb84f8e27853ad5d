"""Sample StreamApp bodies shared by the operator's unit tests."""

from __future__ import annotations

from baton.operator.core.spec import StreamApp
from tests.support.samples import example_body


def test_the_example_parses_as_a_streamapp() -> None:
    sample = StreamApp.from_body(example_body())
    assert sample.application_id == "click-counter"
    assert sample.control_topic == "click-counter-control"
