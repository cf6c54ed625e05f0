"""How a ledger's state is kept: mechanism, apart from the meaning in ``ledger.core``.

Read it in this order:

* ``contract``: what every backend does (``EventStore``: the log; ``SnapshotStore``: caches);
* ``sqlite``, ``postgres`` (with ``pgaddress``): the backends, one file or one database (the only
  modules that import ``sqlite3`` and ``psycopg``); ``stores`` picks one from an address;
* ``codecs``, ``archive``, ``snapshot``: a state's stored forms (the keyed generation of the
  present, history documents), derived from its declaration in the core;
* ``lazy``: entries read one key at a time from a stored generation, healing from the log;
* ``held``: the held state, in step with the log, read from (and stored as) a generation;
* ``writing``: snapshots stored and read back; ``checks``: compared with a fold (``verify``);
* ``maintain``: the history snapshots, stored when asked for, once at a time (``holders``: who
  holds its lease, and whether that process still runs);
* ``collector``: the one policy for Python's garbage collector.

The core never imports this package; the runner (``ledger.runner``) and the API sit above it.
Nothing here starts a process (R22).
"""
