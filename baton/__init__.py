"""Baton: stateful stream applications on Kafka in Python, run on Kubernetes."""

__version__ = "0.1.0"
