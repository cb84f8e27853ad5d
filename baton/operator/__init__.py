"""The Baton operator: StreamApp CRD reconciler (kopf) around a pure core.

Layout: ``core/`` (everything pure: the typed spec, builders, the deploy/flip machine, status,
RBAC as data, the compactor's CronJob), ``kube``/``topics``/``coverage`` (I/O), ``cache`` and
``state`` (the process's shared state), ``reconcile`` (one reconciliation), ``handlers`` (kopf
glue), ``leader``, ``metrics``, ``cli`` (commands).
"""
