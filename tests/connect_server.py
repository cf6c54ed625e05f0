"""A Spark Connect server in a process of its own, as a Connect user meets one: the tests'
``connect_spark`` session talks to it over gRPC on the loopback address, and shares nothing
with the test process but the files on disk.

    python -m tests.connect_server PORT [MASTER] [KEY=VALUE ...]

It starts Spark (``local[2]`` unless a master is given, ``local-cluster[2,1,1024]`` for
executors apart from the driver) with Spark's own Connect plugin (and any more settings given), prints ``READY`` once the
server listens, and runs until it is killed or the process that started it is gone. The tests
kill it at the end of their session; a test process killed before that (a ``timeout``, a crashed
xdist worker) never gets there, and the server runs in its own process group, so without the
second condition it and its JVM outlived the run (four were found after timed-out runs). Its JVM
ends with it: PySpark's gateway exits when the Python that launched it does.
"""

from __future__ import annotations

import os
import sys
import time

from spark_ops import local_session


PARENT_POLL_SECONDS = 1.0


def main(port: str, master: str = "local[2]", *settings: str) -> None:
    parent = os.getppid()
    local_session("retention-ledger-connect-server", master=master, remote="", conf={
        "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": port,
        **dict(setting.split("=", 1) for setting in settings),
    })
    print("READY", flush=True)
    while os.getppid() == parent:  # an orphan is handed to another parent
        time.sleep(PARENT_POLL_SECONDS)


if __name__ == "__main__":
    main(*sys.argv[1:])
