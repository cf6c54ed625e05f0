"""The pure core: facts, folded state and decisions, with no I/O at all.

Read it in this order:

* ``events``: how a fact is registered, encoded and decoded (schema versions, upcasters);
* ``concern``: the shape every concern shares (``Decision``, slice fields, ``Concern``);
* one module per concern, each owning its events, its slice of state, its fold
  handlers, its commands and its decisions: ``guard`` (watermarks and retention),
  ``tables`` (table lifecycle and names), ``vacuums`` (vacuum runs and their plans);
* ``maps``: the overlay maps a fold freezes big dicts into (entries plus changes);
* ``fold``: the engine that applies recorded events to a state, checking the log;
* ``model``: the one module that joins the concerns into ``State``, ``decide`` and ``fold``.

Nothing here imports SQLite, Spark, the file system or ``ledger.persistence``, and
nothing here reads storage: a state's maps may be backed by entries a stored snapshot
supplies, but the core sees only mappings (``maps.Entries``); the persistence package,
the runner and the edges sit above it (see the import-linter contracts in ``pyproject.toml``).
"""
