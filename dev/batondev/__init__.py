"""Dev and test tooling: installs and runs Baton's local stack on 127.0.0.1.

Nothing here ships in the `baton-streams` distribution; it is what `dev/stack`,
the pytest fixtures and the demo use to get real Kafka and a real Kubernetes API.
"""
