"""Task assignment: Baton's own assignor (pure) and the group membership that runs it.

``model`` and ``assignor`` are pure (no I/O): who owns which task as active, standby or
warmup. ``wire`` encodes what members tell the leader and what the leader hands back, in
the user data of Kafka's classic consumer group protocol. ``membership`` is the I/O: a
kafka-python group member whose only job is membership; records flow through
confluent-kafka with ``assign()``.
"""
