"""TensorBoard event files, read without TensorBoard: scalars only.

An event file is a TFRecord stream: each record is a little-endian uint64 length, the masked
CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the data. The data is an
``Event`` protobuf: ``wall_time`` (field 1, double), ``step`` (2, int64) and ``summary`` (5),
whose ``value`` entries (1) have a ``tag`` (1) and either a ``simple_value`` (2, float — what
``torch.utils.tensorboard`` and Lightning's TensorBoardLogger write) or a scalar ``tensor``
(8: TF 2's ``tf.summary.scalar``; float/double values or ``tensor_content``). Everything else
(graphs, histograms, images) is skipped. A record whose checksums fail ends the file (a
writer killed mid-record leaves a torn tail).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


def _table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC = _table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


@dataclass(frozen=True)
class Scalar:
    tag: str
    step: int
    wall_time: float
    value: float


def records(data: bytes, *, check_data: bool = True) -> Iterator[bytes]:
    """The records of a TFRecord stream, up to the first torn or corrupt one."""
    at = 0
    while at + 12 <= len(data):
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack("<I", data[at + 8:at + 12])
        end = at + 12 + length + 4
        if crc != masked(header) or end > len(data):
            return
        body = data[at + 12:at + 12 + length]
        if check_data and struct.unpack("<I", data[end - 4:end])[0] != masked(body):
            return
        yield body
        at = end


def _varint(data: bytes, at: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, at
        shift += 7


def fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of a protobuf message: varints and fixed widths as
    integers (their raw bits), length-delimited as bytes."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            yield number, wire, value
        elif wire == 1:
            yield number, wire, int.from_bytes(data[at:at + 8], "little")
            at += 8
        elif wire == 5:
            yield number, wire, int.from_bytes(data[at:at + 4], "little")
            at += 4
        elif wire == 2:
            length, at = _varint(data, at)
            yield number, wire, data[at:at + length]
            at += length
        else:
            raise ValueError(f"protobuf wire type {wire} is not supported")


def _f32(bits: int) -> float:
    return float(struct.unpack("<f", bits.to_bytes(4, "little"))[0])


def _f64(bits: int) -> float:
    return float(struct.unpack("<d", bits.to_bytes(8, "little"))[0])


def _tensor_value(data: bytes) -> float | None:
    """A scalar TensorProto's value: float_val (5), double_val (6) or tensor_content (4)."""
    dtype = 0
    for number, wire, value in fields(data):
        if number == 1 and wire == 0:
            dtype = int(value)
        elif number == 5 and wire == 5:
            return _f32(int(value))
        elif number == 5 and wire == 2 and isinstance(value, bytes) and len(value) >= 4:
            return _f32(int.from_bytes(value[:4], "little"))  # packed
        elif number == 6 and wire == 2 and isinstance(value, bytes) and len(value) >= 8:
            return _f64(int.from_bytes(value[:8], "little"))
        elif number == 4 and isinstance(value, bytes):
            if dtype == 1 and len(value) == 4:
                return _f32(int.from_bytes(value, "little"))
            if dtype == 2 and len(value) == 8:
                return _f64(int.from_bytes(value, "little"))
    return None


def _summary_value(data: bytes) -> tuple[str, float] | None:
    tag, value = None, None
    for number, wire, raw in fields(data):
        if number == 1 and isinstance(raw, bytes):
            tag = raw.decode("utf-8", "replace")
        elif number == 2 and wire == 5 and isinstance(raw, int):
            value = _f32(raw)
        elif number == 8 and isinstance(raw, bytes):
            value = _tensor_value(raw)
    return (tag, value) if tag is not None and value is not None else None


def scalars(data: bytes) -> Iterator[Scalar]:
    """The scalars of an event file's bytes."""
    for record in records(data):
        wall, step, summary = 0.0, 0, b""
        for number, wire, value in fields(record):
            if number == 1 and wire == 1 and isinstance(value, int):
                wall = _f64(value)
            elif number == 2 and wire == 0 and isinstance(value, int):
                step = value - (1 << 64) if value >= 1 << 63 else value
            elif number == 5 and isinstance(value, bytes):
                summary = value
        for number, _, value in fields(summary):
            if number == 1 and isinstance(value, bytes) and (got := _summary_value(value)):
                yield Scalar(got[0], step, wall, got[1])


def event_files(logdir: Path) -> list[Path]:
    """The event files under ``logdir`` (``events.out.tfevents.*``), in name order."""
    return sorted(logdir.rglob("events.out.tfevents.*"))
