"""The local SparkSession every entry point uses unless the caller brings its own.

UTC everywhere (the ledger's times are UTC; a session in local time would make
timestamps in tables disagree with the ledger's), no UI, quiet logs, and the
driver's own Python for the workers so they import the same ``spark_ops``.
"""

from __future__ import annotations

import os
import sys
from importlib import resources

from pyspark.sql import SparkSession


def local_session(app_name: str = "retention-ledger", *, master: str = "local[2]",
                  shuffle_partitions: int = 4) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Spark reads log4j2.properties from its conf dir when the JVM starts; ours keeps it quiet.
    os.environ.setdefault("SPARK_CONF_DIR", str(resources.files("spark_ops").joinpath("conf")))
    java_options = "-Duser.timezone=UTC"
    spark = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.executor.extraJavaOptions", java_options)
        .config("spark.sql.sources.partitionOverwriteMode", "static")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
