"""The blue-green control protocol, shared by workers and the flip coordinator.

Both colors process the full input; a compacted control topic ``<applicationId>-control``
says which color emits to sinks for which input offsets. This package holds the messages
(:mod:`.messages`), the emission rule (:mod:`.gate`), the coordinator's state machine
(:mod:`.flipper`) and the Kafka I/O around them (:mod:`.channel`). It depends on neither
kopf nor Kubernetes, so the worker image can use it and ``baton flip`` works without a
cluster.
"""
