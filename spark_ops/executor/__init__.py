"""What runs on Spark's executors: listing, confinement checks, deleting (R9, R19, R20).

This package imports the standard library, and pyarrow (a dry run's dataset) and obstore
(object stores) where they are used; never the ledger core, attrs, immutables, orjson,
sqlite-utils, click or rich (an import-linter contract keeps it so). The driver zips it and
ships it to the executors itself (``spark_ops.vacuum_job.ship``), so a cluster needs nothing
of retention-ledger installed: PySpark and pyarrow, and obstore for an object store.

The work items the driver hands over, and the results that come back, are ``vacuum_work``'s
records (a package of the standard library only, shipped with this one):

* ``tasks``: the shapes of a task (whole items; tables split below the table; the pre-flight);
* ``dispatch``: one table from a kind of work to its runner, each in its own module (``run_purge``,
  ``run_folders``, ``run_trim``, ``run_stragglers``, ``run_foreign``; ``runners`` imports them all);
  its docstring says how a new kind is added;
* ``job``: what every task of a vacuum shares, with the warehouse's ``Storage`` built once;
* ``fs``: what is done to one location's files, written once for every storage;
* ``storage``: where the files are, chosen once from the root (``stores.storage_for``): ``disk``'s
  ``LocalDisk`` (never through a symbolic link) or ``objects``' ``ObjectStore`` (streamed listings,
  DeleteObjects batches), each answering the questions of policy where they differ; and the
  ``Deleter`` that deletes in batches on either;
* ``receipts``: what a task deleted, written down as it goes (``DeletionLog``, R20).
"""
