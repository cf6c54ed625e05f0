"""Every kind's runner, imported so that each registers itself in ``dispatch.RUNNERS``: a new kind
of work adds its runner's module and one line here (``dispatch`` says the whole of it)."""

from . import run_folders, run_foreign, run_purge, run_stragglers, run_trim

__all__ = ["run_folders", "run_foreign", "run_purge", "run_stragglers", "run_trim"]
