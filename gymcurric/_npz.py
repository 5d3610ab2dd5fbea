"""Reading the ``.npz`` files gymcurric writes: a damaged file is a ``DataError`` naming it.

``np.load`` reports a damaged file in many ways (``EOFError`` for an empty file,
``zipfile.BadZipFile`` for a truncated one, a pickle refusal for text, ``zlib.error`` or a CRC
``BadZipFile`` for a corrupt member); every reader of a checkpoint, ring or history file goes
through :func:`read_npz`, so each of them raises one :class:`~gymcurric.errors.DataError` that
names the file and what is wrong with it instead.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from gymcurric.errors import DataError

__all__ = ["read_npz"]

# a zip file starts with a local file header, or (no members) with the end-of-archive record
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


def read_npz(path: str | os.PathLike[str], what: str) -> dict[str, np.ndarray]:
    """Every member of the ``.npz`` at ``path``, read now, with pickled objects refused.

    Args:
        path: the file.
        what: what the file should be, for messages (``"ReplayRing file"``).

    Raises:
        FileNotFoundError: there is no file at ``path`` (a missing file is not a damaged one).
        DataError: ``"<path>: not a <what>: <why>"``: the file is empty, not a zip archive,
            truncated, has a corrupt member, or a member holds Python objects (pickle refused).
    """
    name = os.fspath(path)

    def fail(why: str) -> DataError:
        return DataError(f"{name}: not a {what}: {why}")

    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
            if not head:
                raise fail("the file is empty (0 bytes)")
            if head not in _ZIP_MAGIC:
                raise fail(f"the file is not an .npz (zip) archive (it starts with {head!r})")
            fh.seek(0)
            npz: Any = np.load(fh, allow_pickle=False)
            with npz:
                out: dict[str, np.ndarray] = {}
                for key in npz.files:
                    try:
                        out[key] = npz[key]
                    except MemoryError:
                        raise
                    except Exception as exc:  # a CRC or zlib error, a bad .npy header, ...
                        why = f"member {key!r} is damaged ({_why(exc)})"
                        if isinstance(exc, ValueError) and "allow_pickle" in str(exc):
                            why = (
                                f"member {key!r} holds Python objects, which are refused "
                                "(allow_pickle=False)"
                            )
                        raise fail(why) from exc
                    if not isinstance(out[key], np.ndarray):
                        raise fail(f"member {key!r} is not a .npy array")
                return out
    except (FileNotFoundError, DataError, MemoryError):
        raise
    except Exception as exc:  # BadZipFile, EOFError, zlib.error, OSError, ValueError, ...
        raise fail(f"the file is damaged or truncated ({_why(exc)})") from exc
