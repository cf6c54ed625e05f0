"""A Spark Connect server in a process of its own, as a Connect user meets one: the tests'
``connect_spark`` session talks to it over gRPC on the loopback address, and shares nothing
with the test process but the files on disk.

    python -m tests.connect_server PORT [MASTER]

It starts Spark (``local[2]`` unless a master is given, ``local-cluster[2,1,1024]`` for
executors apart from the driver) with Spark's own Connect plugin, prints ``READY`` once the
server listens, and runs until it is killed.
"""

from __future__ import annotations

import sys
import time

from spark_ops import local_session


def main(port: str, master: str = "local[2]") -> None:
    local_session("retention-ledger-connect-server", master=master, remote="", conf={
        "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": port,
    })
    print("READY", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main(*sys.argv[1:])
