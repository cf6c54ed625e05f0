"""One table from a kind of vacuum work to what carries it out on a task: ``run`` looks each item's
kind up in ``RUNNERS``, where each kind's runner registered itself (``@runs(Kind)``).

A runner takes what the task has at hand (``Task``: the job, the task's deletion log, the ledger's
lists where they are) and every item of its kind the task was given, and yields a ``Result`` for
each (``item`` set; a part's names the part). It re-checks what it is given before it touches a
file (R2, R9), and touches files only through the job's ``Storage`` (``fs``). An item of a kind no
runner registered for is refused, never skipped.

Adding a kind of work (an integrity scrub, say, that lists files and reports what is missing,
deleting nothing):

1. its record in ``vacuum_work``, its own module beside ``items.py``: a subclass of
   ``vacuum_work.Item`` with a ``kind``, answering for itself what ``Item`` asks; and
   one field of ``Plan`` (``vacuum_work/plan.py``) holding its items, marked ``WORK``;
2. its runner in ``spark_ops/executor``, its own module: a function decorated ``@runs(Scrub)``
   (and ``@each`` if it takes one item at a time);
   then one import line in ``runners.py``, which imports every runner so that each registers;
3. what the ledger plans and records of it (``ledger.core``): the plan's items, and what its
   results record at a run's end.

Nothing else changes: this module, ``tasks`` (which runs whatever it is given through here), the
driver (which splits, places and reports every item by asking the item), the report and the CLI's
text (one renderer over the kinds' own words) stay as they are.

Standard library only (R19).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Iterator, TypeVar

from vacuum_work import Item, Result

from .job import Files, Job
from .receipts import DeletionLog

Runner = Callable[["Task", list[Any]], Iterable[Result]]
"""What carries out every item of one kind a task was given."""

RUNNERS: dict[str, Runner] = {}
"""Each kind's runner, by the kind's name."""

R = TypeVar("R", bound=Runner)


@dataclass(frozen=True)
class Task:
    """What one task has at hand besides its items."""
    job: Job
    receipt: DeletionLog | None
    """Where what it deletes is written down (None: a dry run)."""
    files: Files | None = None
    """The ledger's file lists (on the driver only): what the ledger knows is deleted by key."""


def runs(*kinds: type[Item]) -> Callable[[R], R]:
    """Register the decorated function as the runner of ``kinds``."""
    def register(runner: R) -> R:
        for kind in kinds:
            RUNNERS[kind.kind] = runner
        return runner
    return register


def each(one: Callable[[Task, Any], Result]) -> Runner:
    """The runner of a kind whose items are carried out one at a time, each result naming its item."""
    return lambda task, items: (replace(one(task, item), item=item) for item in items)


def run(task: Task, items: Iterable[Item]) -> Iterator[Result]:
    """Every item's result, the items of one kind handed to its runner together (in the order their
    kinds first come)."""
    by_kind: dict[str, list[Item]] = {}
    for item in items:
        by_kind.setdefault(item.kind, []).append(item)
    for kind, mine in by_kind.items():
        runner = RUNNERS.get(kind)
        if runner is None:
            yield from (Result(i, error=f"refused: no such kind of work {kind!r}") for i in mine)
        else:
            yield from runner(task, mine)
