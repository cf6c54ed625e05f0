"""The ledger's tables in other engines, with no Spark and no JVM (R26).

* In this process: a version as a ``pyarrow`` dataset (``dataset``, ``reading``) that DuckDB,
  Polars and pandas read; every live table by its two-part name in a DuckDB connection
  (``attach``, ``refresh``, ``detach``).
* In another process, any Iceberg reader: the live tables' kept versions published into an
  Iceberg SQL catalog (``publish``), one snapshot a version, pinned until the next publication.

What another engine reads is pinned while it is exposed, so no vacuum deletes a file under it.
The engines are optional extras (``pip install 'retention-ledger[duckdb]'``); a call whose engine
is not installed says which extra brings it. Names are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "dataset": ".datasets", "reading": ".datasets", "READ_PIN_LEASE": ".datasets",
    "attach": ".duck", "refresh": ".duck", "detach": ".duck",
    "publish": ".iceberg", "PublishReport": ".iceberg", "CatalogUnavailable": ".iceberg",
    "PUBLISH_PIN_LEASE": ".iceberg",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'arrow_ops' has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value
