"""The on-disk object cache of the LLVM backend (``cache_dir=`` or ``TE_LLVM_CACHE_DIR``).

A kernel compiled once is stored under its key (the sha256 of its IR text, the CPU and the
LLVM version, ``jit.content_hash``) as three files:

* ``<key>.o``: the object code MCJIT loads,
* ``<key>.ll``: the optimised IR text (``kernel.optimized_source``),
* ``<key>.sha256``: the checksums, a small JSON record ``{"format", "key", "object",
  "object_size", "ir"}`` where ``object`` is the sha256 of the key and the object bytes.

Nothing is loaded that does not match its record: an empty, truncated or rewritten object,
or another kernel's object (and record) copied under this key, is ignored with a
``CacheWarning`` and the kernel is compiled again, which rewrites the entry. Only object
code and text are stored, never pickles.

The directory is created with mode 0700. A directory that another user owns, or that its
group or others may write, is not used (a ``CacheWarning`` says why, once per directory):
whoever can write there could put code into the process. A path that exists and is not a
directory raises ``BuildError``. A directory that cannot be created or written costs the
cache, never the build (a ``CacheWarning``, once per directory).

>>> import os, tempfile
>>> d = os.path.join(tempfile.mkdtemp(), "cache")
>>> directory(d) == d, oct(os.stat(d).st_mode & 0o777)
(True, '0o700')
>>> store(d, "k1", b"object bytes", "; ir")
True
>>> e = load(d, "k1"); e.obj, e.ir
(b'object bytes', '; ir')
>>> with open(os.path.join(d, "k1.o"), "wb") as f: _ = f.write(b"obj")    # truncated
>>> import warnings
>>> with warnings.catch_warnings(record=True) as w:
...     warnings.simplefilter("always"); print(load(d, "k1"), w[0].category.__name__)
None CacheWarning
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import warnings
from dataclasses import dataclass

from ..kernel import BuildError

__all__ = ["CacheWarning", "Entry", "directory", "load", "store", "ENV"]

ENV = "TE_LLVM_CACHE_DIR"
_FORMAT = 1
_warned: set = set()


class CacheWarning(UserWarning):
    """The on-disk kernel cache was not used, or an entry in it was ignored (see the module
    docstring); the kernel is still built.

    >>> issubclass(CacheWarning, UserWarning)
    True
    """


@dataclass(frozen=True)
class Entry:
    """A verified cache entry: the object code and the optimised IR text (None when its file
    is missing or does not match its checksum)."""

    obj: bytes
    ir: str | None


def _warn_once(path: str, what: str, message: str) -> None:
    if (path, what) not in _warned:
        _warned.add((path, what))
        warnings.warn(message, CacheWarning, stacklevel=4)


def directory(cache_dir) -> str | None:
    """The cache directory to use for ``cache_dir`` (None, False or "" and no
    ``TE_LLVM_CACHE_DIR``: no cache), created if missing; None when it may not be used.

    >>> directory(False) is None
    True
    """
    source = "cache_dir"
    if cache_dir is None:
        cache_dir = os.environ.get(ENV) or None
        source = ENV
    if cache_dir in (None, False, ""):
        return None
    path = os.fspath(cache_dir)
    if os.path.exists(path) and not os.path.isdir(path):
        raise BuildError(f"{source} {path!r} is a file, not a directory; pass the path of a directory for the "
                         "kernel object cache (it is created if missing), or cache_dir=False for none")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except (NotADirectoryError, FileExistsError):
        raise BuildError(f"{source} {path!r} cannot be a directory (a part of the path is a file); pass the path "
                         "of a directory for the kernel object cache, or cache_dir=False for none") from None
    except OSError as exc:
        _warn_once(path, "create", f"kernel cache directory {path!r} could not be created ({exc.strerror}); "
                                   "kernels are compiled but not cached")
        return None
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        _warn_once(path, "owner", f"kernel cache directory {path!r} belongs to user id {st.st_uid}, not to this "
                                  f"user ({os.getuid()}); it is not used (its objects would run in this process). "
                                  "Use a directory of your own")
        return None
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        _warn_once(path, "mode", f"kernel cache directory {path!r} is writable by its group or by others (mode "
                                 f"{oct(st.st_mode & 0o777)}); it is not used (its objects would run in this "
                                 f"process). Run chmod 700 on it or use another directory")
        return None
    return path


def _digest(key: str, data: bytes) -> str:
    return hashlib.sha256(key.encode() + b"\0" + data).hexdigest()


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def load(path: str, key: str) -> Entry | None:
    """The verified entry stored under ``key`` in the cache directory ``path``, else None
    (a missing entry silently; a damaged or foreign one with a ``CacheWarning``).

    >>> import tempfile
    >>> d = tempfile.mkdtemp(); store(d, "a", b"code", None), store(d, "b", b"other", None)
    (True, True)
    >>> load(d, "a"), load(d, "missing")
    (Entry(obj=b'code', ir=None), None)
    """
    base = os.path.join(path, key)
    try:
        obj = _read(base + ".o")
        record = _read(base + ".sha256")
        ir = _read(base + ".ll")
    except OSError as exc:
        warnings.warn(f"kernel cache entry {base}.o could not be read ({exc.strerror}); compiling the kernel "
                      "again", CacheWarning, stacklevel=3)
        return None
    if not obj and record is None:
        return None
    if record is None:
        warnings.warn(f"kernel cache entry {base}.o has no checksum record {key}.sha256 (an older version wrote "
                      "it, or it was damaged); it is ignored and the kernel compiled again", CacheWarning,
                      stacklevel=3)
        return None
    try:
        meta = json.loads(record.decode())
        ok = (isinstance(meta, dict) and meta.get("format") == _FORMAT and meta.get("key") == key and obj
              and meta.get("object_size") == len(obj) and meta.get("object") == _digest(key, obj))
    except (UnicodeDecodeError, ValueError):
        meta, ok = None, False
    if not ok:
        warnings.warn(f"kernel cache entry {base}.o is damaged or belongs to another kernel (it does not match "
                      f"its checksum in {key}.sha256); it is ignored and the kernel compiled again",
                      CacheWarning, stacklevel=3)
        return None
    text = None
    if ir is not None and meta.get("ir") == _digest(key, ir):
        text = ir.decode()
    return Entry(obj, text)


def _write_atomic(path: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def store(path: str, key: str, obj: bytes, ir: str | None) -> bool:
    """Store an entry (each file replaced atomically, the checksums last); False, with a
    ``CacheWarning`` once per directory, when the directory cannot be written.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp(); store(d, "k", b"code", "; ir"), sorted(os.listdir(d))
    (True, ['k.ll', 'k.o', 'k.sha256'])
    """
    base = os.path.join(path, key)
    ir_bytes = ir.encode() if ir is not None else None
    meta = {"format": _FORMAT, "key": key, "object": _digest(key, obj), "object_size": len(obj),
            "ir": _digest(key, ir_bytes) if ir_bytes is not None else None}
    try:
        _write_atomic(base + ".o", obj)
        if ir_bytes is not None:
            _write_atomic(base + ".ll", ir_bytes)
        _write_atomic(base + ".sha256", json.dumps(meta).encode())
    except OSError as exc:
        _warn_once(path, "write", f"kernel cache directory {path!r} cannot be written ({exc.strerror}); kernels "
                                  "are compiled but not cached")
        return False
    return True
