"""Reading a Kafka client properties file (``client.properties``), with javaproperties.

Kafka users keep their client settings in Java properties files; librdkafka's tools take the
same ``key=value`` form. The format has escapes and continuation lines, so it is read by a
library, never split by hand.
"""

from __future__ import annotations

from pathlib import Path

import javaproperties


class PropertiesFileError(ValueError):
    """The file cannot be read: says which file and why."""


def read_properties(path: Path) -> dict[str, str]:
    try:
        with path.open(encoding="utf-8") as f:
            return dict(javaproperties.load(f))
    except OSError as exc:
        raise PropertiesFileError(f"cannot read Kafka config file {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise PropertiesFileError(f"cannot parse Kafka config file {path}: {exc}") from exc
