"""A small Parquet reader for the files the compactor writes, so workers need neither Spark nor pyarrow.

It reads flat files of BYTE_ARRAY columns (required or optional), with data pages v1 or
v2, PLAIN or dictionary encoding, uncompressed or gzip: what Spark writes with
``compression=gzip``. Anything else (snappy, zstd, nested or numeric columns) raises
``Unsupported``, and ``snapshot.py`` uses pyarrow instead when it is installed.

The footer and page headers are Thrift compact protocol; this module decodes that into
dicts of field id -> value, enough for the few fields it needs.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterator, Sequence
from typing import Any

MAGIC = b"PAR1"
_BYTE_ARRAY = 6
_OPTIONAL = 1
_UNCOMPRESSED, _GZIP = 0, 2
_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 2, 3
_PLAIN, _PLAIN_DICTIONARY, _RLE_DICTIONARY = 0, 2, 8


class Unsupported(ValueError):
    """A Parquet feature outside the subset this reader knows."""


class _Thrift:
    """Thrift compact protocol: structs become {field id: value}."""

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def varint(self) -> int:
        shift = result = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, kind: int) -> Any:
        if kind in (1, 2):  # booleans inside containers: one byte, 1 is true
            byte = self.data[self.pos]
            self.pos += 1
            return byte == 1
        if kind == 3:
            byte = self.data[self.pos]
            self.pos += 1
            return byte
        if kind in (4, 5, 6):
            return self.zigzag()
        if kind == 7:
            (number,) = struct.unpack_from("<d", self.data, self.pos)
            self.pos += 8
            return number
        if kind == 8:
            size = self.varint()
            raw = self.data[self.pos : self.pos + size]
            self.pos += size
            return raw
        if kind in (9, 10):
            header = self.data[self.pos]
            self.pos += 1
            size = header >> 4
            if size == 15:
                size = self.varint()
            return [self.value(header & 0x0F) for _ in range(size)]
        if kind == 11:
            size = self.varint()
            if not size:
                return {}
            types = self.data[self.pos]
            self.pos += 1
            return {self.value(types >> 4): self.value(types & 0x0F) for _ in range(size)}
        if kind == 12:
            return self.struct()
        raise Unsupported(f"thrift type {kind}")

    def struct(self) -> dict[int, Any]:
        out: dict[int, Any] = {}
        field = 0
        while True:
            header = self.data[self.pos]
            self.pos += 1
            if header == 0:
                return out
            kind, delta = header & 0x0F, header >> 4
            field = field + delta if delta else self.zigzag()
            if kind in (1, 2):  # a boolean field carries its value in the type
                out[field] = kind == 1
            else:
                out[field] = self.value(kind)


def _hybrid(data: bytes, pos: int, end: int, width: int, count: int) -> list[int]:
    """RLE / bit-packed hybrid values (definition levels, dictionary indices)."""
    out: list[int] = []
    reader = _Thrift(data, pos)
    size = (width + 7) // 8
    mask = (1 << width) - 1
    while len(out) < count and reader.pos < end:
        header = reader.varint()
        if header & 1:
            groups = header >> 1
            raw = int.from_bytes(data[reader.pos : reader.pos + groups * width], "little")
            reader.pos += groups * width
            out.extend((raw >> (i * width)) & mask for i in range(groups * 8))
        else:
            value = int.from_bytes(data[reader.pos : reader.pos + size], "little")
            reader.pos += size
            out.extend([value] * (header >> 1))
    return out[:count]


def _plain(data: bytes, pos: int, count: int) -> list[bytes]:
    out = []
    for _ in range(count):
        (size,) = struct.unpack_from("<i", data, pos)
        out.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return out


def _decompress(raw: bytes, codec: int) -> bytes:
    if codec == _UNCOMPRESSED:
        return raw
    if codec == _GZIP:
        return gzip.decompress(raw)
    raise Unsupported(f"compression codec {codec} (only uncompressed and gzip; install pyarrow for others)")


def _column(data: bytes, meta: dict[int, Any], optional: bool) -> list[bytes | None]:
    """All values of one column chunk."""
    if meta[1] != _BYTE_ARRAY:
        raise Unsupported(f"column type {meta[1]}")
    codec, total = meta[4], meta[5]
    pos = meta.get(11) or meta[9]  # the dictionary page comes first when there is one
    dictionary: list[bytes] = []
    out: list[bytes | None] = []
    while len(out) < total:
        reader = _Thrift(data, pos)
        header = reader.struct()
        body_start, size = reader.pos, header[3]
        pos = body_start + size
        kind = header[1]
        if kind == _DICTIONARY_PAGE:
            body = _decompress(data[body_start:pos], codec)
            dictionary = _plain(body, 0, header[7][1])
            continue
        if kind == _DATA_PAGE:
            page = header[5]
            count, encoding = page[1], page[2]
            body = _decompress(data[body_start:pos], codec)
            at = 0
            levels = [1] * count
            if optional:
                (length,) = struct.unpack_from("<i", body, 0)
                levels = _hybrid(body, 4, 4 + length, 1, count)
                at = 4 + length
        elif kind == _DATA_PAGE_V2:
            page = header[8]
            count, encoding = page[1], page[4]
            def_length, rep_length = page[5], page[6]
            if rep_length:
                raise Unsupported("repeated columns")
            levels = _hybrid(data, body_start, body_start + def_length, 1, count) if optional else [1] * count
            values_raw = data[body_start + def_length : pos]
            body = _decompress(values_raw, codec) if page.get(7, True) else values_raw
            at = 0
        else:
            raise Unsupported(f"page type {kind}")
        present = sum(levels)
        if encoding == _PLAIN:
            values = _plain(body, at, present)
        elif encoding in (_PLAIN_DICTIONARY, _RLE_DICTIONARY):
            width = body[at]
            values = [dictionary[i] for i in _hybrid(body, at + 1, len(body), width, present)]
        else:
            raise Unsupported(f"encoding {encoding}")
        it = iter(values)
        out.extend(next(it) if level else None for level in levels)
    return out


def read_columns(data: bytes, names: Sequence[str]) -> dict[str, list[bytes | None]]:
    """Whole columns of a flat Parquet file of binary columns."""
    if data[:4] != MAGIC or data[-4:] != MAGIC:
        raise Unsupported("not a Parquet file")
    (length,) = struct.unpack_from("<i", data, len(data) - 8)
    footer = _Thrift(data, len(data) - 8 - length).struct()
    schema = footer[2][1:]  # the first element is the root
    optional = {e[4].decode(): e.get(3) == _OPTIONAL for e in schema}
    missing = [n for n in names if n not in optional]
    if missing:
        raise Unsupported(f"columns {missing} not in the file")
    out: dict[str, list[bytes | None]] = {n: [] for n in names}
    for group in footer.get(4, []):
        for chunk in group[1]:
            meta = chunk[3]
            name = b".".join(meta[3]).decode()
            if name in out:
                out[name].extend(_column(data, meta, optional[name]))
    return out


def read_pairs(data: bytes, names: tuple[str, str]) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) rows where neither is null."""
    columns = read_columns(data, names)
    for key, value in zip(columns[names[0]], columns[names[1]], strict=True):
        if key is not None and value is not None:
            yield key, value
