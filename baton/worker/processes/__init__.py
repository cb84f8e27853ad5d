"""More than one worker process per pod (``baton run --processes N``, ``spec.processesPerPod``).

One Python process uses one core (the GIL); Kafka Streams scales inside a pod with
``num.stream.threads``. Baton's answer is N worker processes under one supervisor: each
is a group member of its own, with its own state directory on the pod's volume; the
supervisor serves the pod's one metrics/health port. ``plan`` is pure; ``supervisor`` and
``scrape`` do the I/O.
"""
