"""The Baton operator: StreamApp CRD reconciler (kopf), pure builders, status and RBAC.

Layout: ``spec`` (typed StreamApp), ``builders`` (spec -> objects, pure), ``status`` (kstatus,
pure), ``rbac`` (the operator's least-privilege rules), ``kube``/``topics`` (I/O),
``reconcile`` (one reconciliation), ``handlers`` (kopf glue), ``cli`` (commands).
"""
