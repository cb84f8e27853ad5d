"""The changelog compactor and auditor: a PySpark job that snapshots and audits changelogs.

Only the modules that talk to Spark import pyspark (lazily, inside functions), so the
pure parts (latest-per-key, retention, audit rules, the CronJob builder) import anywhere.
"""
