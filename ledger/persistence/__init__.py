"""How a ledger's state is kept: mechanism, apart from the meaning in ``ledger.core``.

Read it in this order:

* ``contract``: what every backend does (``EventStore``: the log; ``SnapshotStore``: caches);
* ``sqlite``: the embedded backend, one file (the only module that imports ``sqlite3``);
* ``codecs``: a slice field's stored form, derived from its declaration in the core;
* ``archive``: the purged-instance archive's stored forms;
* ``lazy``: entries read one key at a time from a stored snapshot, healing from the log;
* ``snapshot``: folded state to stored form and back (the keyed generations, history documents);
* ``cache``: the state cache, which keeps the folded state in step with the log and writes
  the snapshots.

The core never imports this package; the runner (``ledger.runner``) and the API sit above it.
"""
