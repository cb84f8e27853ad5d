"""The topology DSL users write and the graph it builds: pure, no Kafka client."""
