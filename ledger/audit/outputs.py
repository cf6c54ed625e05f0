"""Where an auditor's files go (exports, checkpoints, keys): never over something that matters.

An export or a checkpoint written over the ledger itself destroyed every event; one written
over a signing key destroyed the key. So every output of the audit layer goes through
``target``: a path that is text, not a folder; an existing file only if the caller asked to
overwrite it; and never (overwrite or not) one of the files it protects (the ledger's file
and its ``-wal``/``-shm``, the key a checkpoint is signed with). Missing parent folders are
made, so ``keygen keys/signer.pem`` works in a fresh folder. Everything is checked before
anything is made or written: a refusal changes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from ..errors import InvalidArgument
from ..persistence.stores import is_url


def path_argument(path: object, what: str) -> Path:
    """``path`` as a ``Path``, or ``InvalidArgument`` for anything that cannot name a file."""
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise InvalidArgument(f"the {what} path must be text or a pathlib.Path, got {type(path).__name__} {path!r}")
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument(f"the {what} path is empty; give a file name")
    if "\x00" in text:
        raise InvalidArgument(f"the {what} path {text!r} contains a NUL character, which no file name can hold")
    return Path(text)


def ledger_files(ledger_path: str) -> list[str]:
    """The files that hold a ledger: the SQLite file and its write-ahead log and shared memory."""
    if ledger_path == ":memory:" or is_url(ledger_path):
        return []
    return [ledger_path, f"{ledger_path}-wal", f"{ledger_path}-shm", f"{ledger_path}-journal"]


def target(path: object, what: str, *, overwrite: bool = False, protected: Iterable[str] = ()) -> Path:
    """Check where to write ``what``, and make its folder; see the module docstring."""
    if not isinstance(overwrite, bool):
        raise InvalidArgument(f"overwrite must be True or False, got {overwrite!r}")
    out = path_argument(path, what)
    if out.is_dir():
        raise InvalidArgument(f"{out} is a folder; give the {what} a file name")
    for guarded in protected:
        if _same(out, Path(guarded)):
            raise InvalidArgument(f"refusing to write the {what} to {out}: that is {guarded}, which it would "
                                  "destroy; choose another file")
    if out.exists() and not overwrite:
        raise InvalidArgument(f"{out} exists; refusing to replace it (pass overwrite=True if that is what you mean)")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidArgument(f"cannot make the folder {out.parent} for the {what}: {exc.strerror or exc}") from None
    return out


def _same(a: Path, b: Path) -> bool:
    """Whether two paths name one file (through links too, where both exist)."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)
