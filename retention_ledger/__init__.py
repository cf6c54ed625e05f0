"""The edges of retention-ledger: the ``retention-ledger`` command line and its demo.

They use only the public API of ``ledger`` (and ``spark_ops`` for the Spark
commands); nothing in ``ledger`` or ``spark_ops`` imports them back.
"""
