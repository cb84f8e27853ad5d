"""Pure functions from a StreamApp to the Kubernetes objects that run it (no I/O here)."""

from baton.operator.core.builders.desired import desired_objects

__all__ = ["desired_objects"]
