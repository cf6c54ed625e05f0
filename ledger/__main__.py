"""``python -m ledger``: the same command line as ``retention-ledger`` (it lives in the edge
package ``retention_ledger``; this entry point is the one place the core names it)."""

from retention_ledger.cli import main

main()
