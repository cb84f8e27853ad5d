"""Kafka client settings: one set, checked once, carried into every client Baton opens."""
