"""The KRaft cluster id dev/stack formats a fresh broker with."""

from __future__ import annotations

import base64
import uuid

import pytest
from batondev import kafka

pytestmark = pytest.mark.unit


def test_cluster_ids_never_start_with_a_dash_and_are_base64_uuids() -> None:
    # One uuid4 in 64 encodes to a leading "-", which StorageTool's parser took for an option:
    # 4,000 draws miss such a regression with probability (63/64)**4000, below 1e-27.
    ids = [kafka._cluster_id() for _ in range(4000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(uuid.UUID(bytes=base64.urlsafe_b64decode(i + "==")) for i in ids)
    assert len(set(ids)) == len(ids)
