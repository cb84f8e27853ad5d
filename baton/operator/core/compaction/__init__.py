"""The compactor as the operator renders it (pure): the CronJob (``cronjob``), the Spark Operator's
ScheduledSparkApplication (``sparkapp``), Spark's Kubernetes executors (``kubernetes``), and the
outcome of its Jobs (``jobs``).

They live in the operator's core, not in ``baton/compactor/``, because the operator is their
one caller; the compactor reads from here only the names of what the CronJob passes it (the
driver Pod's variables), and ``baton.operator`` imports nothing of ``baton.compactor``.
"""
