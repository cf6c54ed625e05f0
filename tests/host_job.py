"""One "host" of ``tests/test_hosts.py``: a process with its own connection to a PostgreSQL
ledger, issuing random commands for a while and writing one JSON line per command the ledger
acknowledged (flushed at once, so a SIGKILL loses only the command in flight).

    python -m tests.host_job URL HOST SEED SECONDS OUT [WAREHOUSE]

With WAREHOUSE, the host makes the ledger if it is not there yet (every host at once, in the
test of a new schema that all of them make).

Its own tables are ``h<HOST>.t<n>``; the vacuums it runs (through the ledger's API, no Spark:
the files are not the point here) purge anyone's, so undrops race vacuums, commits race
sweeps, and restores race retention marks across hosts.
"""

from __future__ import annotations

import json
import random
import sys
import time

from ledger import Ledger, LedgerError
from vacuum_work import Result


def main() -> None:
    url, host, seed, seconds, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    warehouse = sys.argv[6] if len(sys.argv) > 6 else None
    rng = random.Random(seed)
    mine: dict[str, str] = {}  # name -> id of my tables, live or dropped
    made = 0
    with open(out, "a") as log, Ledger.open(url, warehouse=warehouse, actor=f"host{host}") as led:
        def ack(**fact: object) -> None:
            log.write(json.dumps(fact) + "\n")
            log.flush()

        print("ready", flush=True)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            action = rng.choice(["create", "create", "drop", "undrop", "write", "write", "restore", "mark",
                                 "vacuum", "abandon"])
            try:
                if action == "create" or not mine:
                    name = f"h{host}.t{made}"
                    made += 1
                    table = led.create_table(name)
                    mine[name] = table.id
                    ack(kind="create", name=name, id=table.id)
                elif action == "drop":
                    name = rng.choice(sorted(mine))
                    ack(kind="drop", id=led.drop_table(name).id)
                elif action == "undrop":
                    name = rng.choice(sorted(mine))
                    ack(kind="undrop", id=led.undrop_table(name).id)
                elif action == "write":
                    name = rng.choice(sorted(mine))
                    write = led.begin_write(name, lease="1s")
                    if rng.random() < 0.3:
                        time.sleep(1.1)  # its lease runs out: a vacuum may sweep it before the commit
                    version = led.commit_write(write.id, [(f"{write.relative_folder}/part-0.parquet", 10)])
                    ack(kind="commit", write=write.id, table=version.table_id, number=version.number)
                elif action == "abandon":
                    name = rng.choice(sorted(mine))
                    ack(kind="begin", write=led.begin_write(name, lease="1s").id)
                elif action == "restore":
                    name = rng.choice(sorted(mine))
                    version = led.restore_table(name, version=1)
                    ack(kind="restore", table=version.table_id, number=version.number)
                elif action == "mark":
                    name = rng.choice(sorted(mine))
                    led.advance_retention_mark(name, led.now())
                    ack(kind="mark", table=mine[name])
                elif action == "vacuum":
                    run = led.start_vacuum(retention="0s", override_floor=True, grace="0s", limit=3)
                    plan = run.plan
                    if plan.run_id is not None:
                        # Every purge, and every write folder deleted (old or swept), as if done.
                        run.finish([Result(t, 1, 10) for t in plan.purges]
                                   + [Result(e, len(e.folders), 10) for e in (*plan.expiries, *plan.sweeps)
                                      if e.folders])
                        ack(kind="vacuum", run=run.run_id, purged=[t.table_id for t in plan.purges])
            except LedgerError as exc:  # a refusal (blocked, expired, raced) is an answer too
                ack(kind="refused", action=action, error=type(exc).__name__)
            time.sleep(rng.random() * 0.01)
        led.verify()
    print("done", flush=True)


if __name__ == "__main__":
    main()
