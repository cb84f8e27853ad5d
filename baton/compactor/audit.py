"""Audit rules (pure): changelog configs that defeat compaction, and divergence between stores.

A finding is a problem a person should act on. Compaction lag (records read versus live
keys) is reported as numbers per partition, not as a finding: every healthy changelog
has an uncompacted active segment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

# Above these, the active segment (never compacted) grows until restores replay most updates.
MAX_SEGMENT_BYTES = 128 * 1024 * 1024
MAX_SEGMENT_MS = 24 * 3600 * 1000
SAMPLES = 10


@dataclass(frozen=True)
class Finding:
    kind: str  # cleanup-policy | segment-bytes | segment-ms | divergence-recompute | divergence-colors
    topic: str
    message: str
    partition: int | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def config_findings(topic: str, configs: Mapping[str, str]) -> list[Finding]:
    """What in a changelog topic's configuration stops compaction from keeping restores short."""
    out: list[Finding] = []
    policy = {p.strip() for p in configs.get("cleanup.policy", "delete").split(",")}
    if "compact" not in policy:
        out.append(
            Finding(
                "cleanup-policy",
                topic,
                f"cleanup.policy is {configs.get('cleanup.policy', 'delete')!r}, not compact: old "
                "updates are never removed, and deleting by retention loses state",
                details={"cleanup.policy": configs.get("cleanup.policy", "delete")},
            )
        )
    elif "delete" in policy:
        out.append(
            Finding(
                "cleanup-policy",
                topic,
                "cleanup.policy is 'compact,delete': retention deletes keys that were not updated "
                "recently, so a restore loses them",
                details={"cleanup.policy": "compact,delete"},
            )
        )
    segment_bytes = _int(configs.get("segment.bytes"))
    if segment_bytes is not None and segment_bytes > MAX_SEGMENT_BYTES:
        out.append(
            Finding(
                "segment-bytes",
                topic,
                f"segment.bytes is {segment_bytes}: the active segment, which is never compacted, "
                f"may hold up to that much; keep it at most {MAX_SEGMENT_BYTES}",
                details={"segment.bytes": segment_bytes},
            )
        )
    segment_ms = _int(configs.get("segment.ms"))
    if segment_ms is not None and segment_ms > MAX_SEGMENT_MS:
        out.append(
            Finding(
                "segment-ms",
                topic,
                f"segment.ms is {segment_ms}: a quiet changelog rolls its active segment (and lets "
                f"it be compacted) only that often; keep it at most {MAX_SEGMENT_MS}",
                details={"segment.ms": segment_ms},
            )
        )
    return out


@dataclass
class Divergence:
    """How two key/value maps differ; samples show a few keys of each kind."""

    compared: int = 0
    missing: int = 0  # in expected, absent from actual
    unexpected: int = 0  # in actual, absent from expected
    different: int = 0
    samples: list[dict[str, str | None]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.missing + self.unexpected + self.different

    def add(self, key: bytes, expected: bytes | None, actual: bytes | None) -> None:
        if expected is None:
            self.unexpected += 1
        elif actual is None:
            self.missing += 1
        else:
            self.different += 1
        if len(self.samples) < SAMPLES:
            self.samples.append({"key": show(key), "expected": show(expected), "actual": show(actual)})

    def to_json(self) -> dict[str, Any]:
        return {
            "compared": self.compared,
            "missing": self.missing,
            "unexpected": self.unexpected,
            "different": self.different,
            "samples": self.samples,
        }


def compare(expected: Mapping[bytes, bytes], actual: Mapping[bytes, bytes]) -> Divergence:
    """Key-by-key comparison of two stores' contents."""
    out = Divergence(compared=len(expected.keys() | actual.keys()))
    for key in sorted(expected.keys() | actual.keys()):
        want, got = expected.get(key), actual.get(key)
        if want != got:
            out.add(key, want, got)
    return out


def show(raw: bytes | None) -> str | None:
    """Bytes for a report: text when it is UTF-8, else hex."""
    if raw is None:
        return None
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return "0x" + raw.hex()


def _int(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


MAX_REASONS = 10  # in status: enough to act on, small enough for an object's status


def not_compared(audits: dict[str, Any]) -> list[str]:
    """What the audit could not check, and why: a clean audit that checked nothing must not look clean."""
    out: list[str] = []
    recompute_audit = audits.get("recompute") or {}
    for skipped in recompute_audit.get("skipped") or []:
        out.append(f"recompute: {skipped}")
    for app, result in sorted((recompute_audit.get("apps") or {}).items()):
        if not result.get("compared"):
            out.append(f"recompute {app}: {result.get('reason', 'not compared')}")
    for base, result in sorted((audits.get("colors") or {}).items()):
        if not result.get("compared"):
            out.append(f"colors {base}: {result.get('reason', 'not compared')}")
    return out
