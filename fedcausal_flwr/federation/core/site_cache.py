"""A site's data file as read and checked, kept between messages in its own folder (Flower-free).

A stock deployment starts a fresh ClientApp process for every message, and each would read and
check the site's CSV again (:func:`~fedcausal_flwr.data.csv_input.read_client_csv` and the
columns a client reads: about 0.3 s for 200,000 rows of 8 columns). The first message keeps the
frame it read, and those columns, in the site's cache folder; a later message loads them instead
(a tenth of the time) when nothing they depend on has changed:

* never stale: an entry is found by the SHA-256 of the file's bytes (read again by every message,
  so a file rewritten in place, within one clock tick, is read afresh), the read settings
  (``data-sep``, ``data-keep-index``, missing values allowed), the versions of Python, numpy and
  pandas, and the size and time of every source file of :mod:`fedcausal_flwr.data` (a changed
  reader never answers from what an older one read). A frame is kept only if the file's bytes were
  the same after the read, and only once it passed every check: a file that fails them fails every
  message, as without the cache;
* the site's own: the folder is the node config's ``data-cache`` (``false``: no cache), by default
  ``.fedcausal-cache`` beside the data file (where the audit log goes by default); it is made
  readable by the site's user only (``0700``, its files ``0600``), and an entry is loaded only from
  such a folder and only if that user owns it (an entry is a pickle). The coordinator never names
  it: it is set in the node config alone. One entry per data file: a new one replaces the old;
* before the policy: an entry is the file as read, so ``share-columns`` and every other policy key
  are applied to each message after the load, exactly as to a frame just read.

Anything wrong with the cache (a folder that cannot be made, another owner, a broken entry) only
means the file is read as without it (said once in the process's log when the folder is unsafe).
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import platform
import stat
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import fedcausal_flwr.data as data_package
from fedcausal_flwr.data.columns import frame_columns, keep_columns
from fedcausal_flwr.options import FALSE_WORDS, TRUE_WORDS, parse_bool

logger = logging.getLogger(__name__)

CACHE_KEY = "data-cache"
#: the cache folder's name beside the data file, when the node config names none
DEFAULT_FOLDER = ".fedcausal-cache"
_FORMAT = b"fedcausal-site-cache 1\n"
_CHUNK = 1 << 20


def cache_folder(node_config: Mapping[str, Any]) -> Path | None:
    """The site's cache folder by its node config: ``data-cache`` names it, ``true`` (the
    default) puts it beside the data file, ``false`` keeps none (None, as for a node without
    data)."""
    if "data-path" not in node_config:
        return None
    value = node_config.get(CACHE_KEY, True)
    if isinstance(value, bool) or str(value).strip().lower() in (*TRUE_WORDS, *FALSE_WORDS):
        if not parse_bool(value):
            return None
        return Path(str(node_config["data-path"])).absolute().parent / DEFAULT_FOLDER
    return Path(str(value).strip()).absolute()


def cached_read(folder: Path | None, path: str, settings: tuple, read: Callable[[], Any]) -> Any:
    """``read()`` (the checked frame of the file at ``path`` under ``settings``), or the frame a
    previous message kept in ``folder`` for the same bytes and settings (module docstring)."""
    if folder is None:
        return read()
    try:
        key = _key(path, settings)
    except OSError:
        return read()  # the reader says what is wrong with the file
    entry = _entry(folder, path, key)
    frame = _load(entry, key) if _private_folder(folder, create=True) else None
    if frame is not None:
        return frame
    frame = read()
    try:
        if _key(path, settings) == key and _private_folder(folder, create=False):
            _store(folder, entry, key, frame)
    except OSError as err:
        logger.debug("site cache %s: not kept (%s)", folder, err)
    return frame


def _key(path: str, settings: tuple) -> str:
    """What an entry depends on (module docstring), as one SHA-256 in hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
    reader = Path(str(data_package.__file__)).parent
    sources = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in reader.glob("*.py"))
    versions = (platform.python_version(), np.__version__, pd.__version__, sources)
    digest.update(repr((settings, versions)).encode())
    return digest.hexdigest()


def _entry(folder: Path, path: str, key: str) -> Path:
    """The entry's file: named after the data file's path (one entry per file) and the key."""
    owner = hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:16]
    return folder / f"{owner}-{key[:32]}.pickle"


def _private_folder(folder: Path, create: bool) -> bool:
    """``folder`` is a directory of this user's that no one else may read or write (made so if
    ``create`` and it does not exist)."""
    try:
        if create:
            folder.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError as err:
        logger.debug("site cache %s: not used (%s)", folder, err)
        return False
    safe = stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077
    if not safe:
        _say_once(f"site cache {folder} is not used: it must be a folder of this user's that no "
                  "one else may read or write (mode 0700)")  # fmt: skip
    return safe


_SAID: set[str] = set()


def _say_once(line: str) -> None:
    if line not in _SAID:
        _SAID.add(line)
        logger.warning(line)


def _load(entry: Path, key: str) -> Any:
    """The frame kept in ``entry`` under ``key``, or None (no such entry, not this user's own
    private file, or not one this module wrote for that key)."""
    try:
        fd = os.open(entry, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            return None
        try:
            if file.readline() != _FORMAT or file.readline().decode().strip() != key:
                return None
            frame, columns = pickle.load(file)
        except Exception as err:
            logger.debug("site cache entry %s: not loaded (%s)", entry, err)
            return None
    keep_columns(frame, columns)  # the columns the client reads first, read with the frame
    return frame


def _store(folder: Path, entry: Path, key: str, frame: Any) -> None:
    """Write ``entry`` atomically (a private temporary file renamed), replacing the data file's
    older entries."""
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=".writing-")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(_FORMAT + key.encode() + b"\n")
            pickle.dump((frame, frame_columns(frame)), file, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, entry)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    owner = entry.name.partition("-")[0]
    for old in folder.glob(f"{owner}-*.pickle"):
        if old != entry:
            old.unlink(missing_ok=True)
