"""Read the key/value metadata of a GGUF file (enough for vocab-only files), without ``gguf``.

``gguf.GGUFReader`` maps every array element to a numpy view and takes ~8 s on a 128K-token
vocabulary; a straight ``struct`` walk of the header takes well under a second.

Reading one of llama.cpp's vocab files (downloaded by the fixture builders)::

    read_gguf_metadata(Path("ggml-vocab-qwen2.gguf"))["general.architecture"]  # 'qwen2'
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from ttftscope.errors import TokenizerError

__all__ = ["read_gguf_metadata"]

_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def unpack(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        n = self.unpack("<Q")
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        return raw.decode("utf-8", errors="surrogateescape")

    def value(self, vtype: int) -> Any:
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype, count = self.unpack("<I"), self.unpack("<Q")
            if etype in _SCALARS:  # one bulk unpack instead of a Python call per element
                fmt = "<" + _SCALARS[etype][1] * count
                values = list(struct.unpack_from(fmt, self.data, self.pos))
                self.pos += struct.calcsize(fmt)
                return values
            return [self.value(etype) for _ in range(count)]
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype])
        raise ValueError(f"unknown GGUF value type {vtype}")


def read_gguf_metadata(path: Path) -> dict[str, Any]:
    """All metadata key/values of a GGUF (v2/v3) file; tensors are not read.

    >>> _ = (result_dir / "not-a-gguf.bin").write_bytes(b"PK\\x03\\x04 a zip")
    >>> read_gguf_metadata(result_dir / "not-a-gguf.bin")
    Traceback (most recent call last):
    ...
    ttftscope.TokenizerError: not-a-gguf.bin is not a GGUF file (magic b'PK\\x03\\x04')
    ...
    """
    try:
        cur = _Cursor(path.read_bytes())
        magic = cur.data[:4]
        if magic != b"GGUF":
            raise TokenizerError(
                f"{path.name} is not a GGUF file (magic {magic!r})",
                hint="pass a llama.cpp .gguf file",
            )
        cur.pos = 4
        version = cur.unpack("<I")
        if version < 2:
            raise TokenizerError(f"{path.name}: GGUF version {version} is too old (need 2+)")
        cur.unpack("<Q")  # tensor count
        n_kv = cur.unpack("<Q")
        meta: dict[str, Any] = {}
        for _ in range(n_kv):
            key = cur.string()
            meta[key] = cur.value(cur.unpack("<I"))
        return meta
    except (OSError, struct.error, ValueError) as exc:
        raise TokenizerError(
            f"cannot read GGUF metadata from {path}: {exc}",
            hint="the file is truncated or not a GGUF",
        ) from exc
