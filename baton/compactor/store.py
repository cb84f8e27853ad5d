"""The snapshot store as the job sees it: any Hadoop filesystem URI, through Spark's JVM.

A local path, ``file://``, ``hdfs://`` or ``s3a://`` all work the same, because every
operation goes through ``org.apache.hadoop.fs.FileSystem`` with the session's Hadoop
configuration (credentials for s3a come from the usual fs.s3a.* settings).
"""

from __future__ import annotations

import json
from typing import Any


class HadoopStore:
    def __init__(self, spark: Any, root: str) -> None:
        self.root = root.rstrip("/")
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _path(self, path: str) -> tuple[Any, Any]:
        jpath = self._jvm.org.apache.hadoop.fs.Path(path)
        return jpath, jpath.getFileSystem(self._conf)

    def exists(self, path: str) -> bool:
        jpath, fs = self._path(path)
        return bool(fs.exists(jpath))

    def children(self, path: str) -> list[str]:
        """Names of the entries of a directory (empty if it does not exist)."""
        jpath, fs = self._path(path)
        if not fs.exists(jpath):
            return []
        return sorted(str(status.getPath().getName()) for status in fs.listStatus(jpath))

    def write_text(self, path: str, text: str) -> None:
        jpath, fs = self._path(path)
        out = fs.create(jpath, True)
        try:
            out.write(bytearray(text.encode()))
        finally:
            out.close()

    def read_text(self, path: str) -> str:
        jpath, fs = self._path(path)
        stream = fs.open(jpath)
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def read_json(self, path: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.read_text(path))
        return data

    def mkdirs(self, path: str) -> None:
        jpath, fs = self._path(path)
        fs.mkdirs(jpath)

    def move(self, source: str, dest: str) -> None:
        """Rename ``source`` to ``dest`` (its parent is created)."""
        src, fs = self._path(source)
        dst, _ = self._path(dest)
        fs.mkdirs(dst.getParent())
        if not fs.rename(src, dst):
            raise OSError(f"could not move {source} to {dest}")

    def delete(self, path: str) -> None:
        jpath, fs = self._path(path)
        fs.delete(jpath, True)
