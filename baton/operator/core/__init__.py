"""The operator's pure core: everything that is a function of its inputs, unit-tested without a cluster.

``spec`` (the typed StreamApp) and ``constants`` (the CRD's names), ``builders/`` (spec ->
desired objects), ``compaction/`` (the compactor's CronJob, ScheduledSparkApplication and
executor template, and what its Jobs' conditions say), ``deploy`` and ``deploy_record`` (the
deploy/flip state machine and what it keeps in status), ``status`` (kstatus), ``drift``
(whether a live object is what was applied), ``rolling`` (the next Pod of a rolling restart),
``rbac`` (the operator's rules as data), ``backoff`` (kopf's retry delays).

Nothing here does I/O, imports a client library (kopf, kubernetes, confluent_kafka,
prometheus_client, ...), holds threads or process state, or imports an operator module
outside ``core`` (tests/unit/test_package_map.py).
"""
