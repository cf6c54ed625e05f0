"""Integrity scrubs: what a look at the warehouse found, recorded in the chain (R20, R27).

A scrub checks that every file a readable, pinned or restorable version names is there at its
recorded size, and that every file a receipt says deleted is still gone; it changes nothing, and
records one ``ScrubFinished`` at its end (a scrub stopped half-way records nothing). So "when was
this warehouse last checked, and what did it find" is a question of the log (``history --type
ScrubFinished``), as provable as any other event: the checked files' Merkle root is in the event,
the names of what was missing or back again in an attachment its digest commits to.

The state keeps nothing of scrubs: no decision depends on one (a scrub's finding is evidence for
people, never a reason for the ledger to refuse or allow anything), so the slice is empty and a
stored state does not change shape.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from ..clock import Micros
from ..errors import InvalidArgument
from .concern import Concern, Decision, corrupt
from .events import event

if TYPE_CHECKING:
    from .fold import Builder
    from .model import State

SCRUB_STREAM = "scrubs"
"""Every scrub's record: one stream, read by no decision, so a scrub never makes a command retry."""

_HEX64 = re.compile(r"[0-9a-f]{64}")


@event("ScrubFinished")
@attrs.frozen
class ScrubFinished:
    """A scrub of ``database`` (None: the whole warehouse) that took the ledger's word at event
    ``as_of`` (its state then) and looked at ``locations`` locations: ``files`` files of ``bytes``
    bytes that should be there (their Merkle root ``root``, ``vacuum_work.scrub``) and
    ``absent_checked`` that receipts say are deleted. ``missing`` were not there at their size,
    ``resurrected`` were there again, ``errors`` locations could not be looked at; ``findings`` is
    the digest of the attachment naming each (None when all three are 0)."""
    scrub_id: str
    database: str | None
    as_of: int
    started_at: Micros
    locations: int
    files: int
    bytes: int
    absent_checked: int
    root: str
    missing: int
    resurrected: int
    errors: int
    findings: str | None
    gone_by_rule: int = 0
    """Files not there at the look that the ledger no longer expected by the scrub's end (a vacuum
    deleted them by the rules while it looked): neither missing nor counted in ``files``' findings."""


@attrs.frozen
class Scrubs:
    """Nothing: see the module docstring."""


@attrs.frozen
class RecordScrub:
    """Record a scrub's end. ``findings`` is the attachment's bytes (None when nothing was found)."""
    event: ScrubFinished
    findings: bytes | None


Command = RecordScrub


def _counts_problem(e: ScrubFinished) -> str | None:
    """What is wrong with a scrub's record (None: nothing), for the decision and the fold alike."""
    counts = (e.as_of, e.started_at, e.locations, e.files, e.bytes, e.absent_checked, e.missing, e.resurrected,
              e.errors, e.gone_by_rule)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        return "counts that are not whole numbers of at least 0"
    if not isinstance(e.root, str) or not _HEX64.fullmatch(e.root):
        return "no Merkle root (64 hex digits)"
    if e.missing > e.files or e.resurrected > e.absent_checked or e.errors > e.locations:
        return "more found than was looked at"
    found = e.missing or e.resurrected or e.errors
    if bool(found) != (e.findings is not None):
        return "findings named without being counted, or counted without being named"
    if e.findings is not None and not (isinstance(e.findings, str) and _HEX64.fullmatch(e.findings)):
        return "a findings digest that is not one (64 hex digits)"
    return None


def _record(state: State, cmd: RecordScrub) -> Decision:
    e = cmd.event
    if not isinstance(e, ScrubFinished) or not isinstance(e.scrub_id, str) or not e.scrub_id:
        raise InvalidArgument("a scrub is recorded from a ScrubFinished with an id")
    if e.as_of > state.seq:
        raise InvalidArgument(f"scrub {e.scrub_id} took the ledger's word at event #{e.as_of}, which is not yet "
                              f"on record (the log ends at #{state.seq})")
    problem = _counts_problem(e)
    if problem is None and cmd.findings is not None and hashlib.sha256(cmd.findings).hexdigest() != e.findings:
        problem = "findings that do not hash to the digest it carries"
    if problem is None and (cmd.findings is None) != (e.findings is None):
        problem = "a findings digest without the findings, or findings without their digest"
    if problem is not None:
        raise InvalidArgument(f"scrub {e.scrub_id} has {problem}: not recorded")
    blobs = () if cmd.findings is None or e.findings is None else ((e.findings, cmd.findings),)
    return Decision(((SCRUB_STREAM, e),), frozenset(), e, blobs)


def _on_finished(b: Builder, e: ScrubFinished, seq: int, time: Micros) -> None:
    problem = _counts_problem(e)
    if problem is not None or e.as_of >= seq:
        raise corrupt(f"event #{seq} records a scrub with {problem or 'a state taken after it'}")


CONCERN = Concern(initial=Scrubs(), evolve={ScrubFinished: _on_finished}, decide={RecordScrub: _record})


def findings_bytes(findings: dict[str, Any]) -> tuple[str, bytes]:
    """The findings attachment (sorted JSON) and its digest."""
    data = orjson.dumps(findings, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(data).hexdigest(), data
