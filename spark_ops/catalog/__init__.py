"""A ledger's tables by name in Spark SQL, without a JVM jar: views over exactly a version's
files (``attach``, ``refresh``, ``detach``), and the ledger's history as table-valued functions."""
