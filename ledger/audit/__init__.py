"""The auditor's side of the ledger: proving the log was never edited, and reading it (R16).

* ``verify``: the chain recomputed, the log refolded from nothing, every rule re-checked,
  and, given a checkpoint, a proof that the log extends it.
* ``checkpoints``: checkpoints (signed with Ed25519 or not), inclusion proofs, keys.
* ``proofs``: taking checkpoints and inclusion proofs from a ledger file.
* ``history``: who did what, filtered and streamed, in words.
* ``export`` / ``offline``: the log in a file, and checking it with no ledger at hand
  (``python -m ledger.audit verify EXPORT CHECKPOINT``).
"""

from .checkpoints import Checkpoint, InclusionProof, generate_key, load_private_key, load_public_key
from .export import ExportReport
from .offline import OfflineReport, verify_export
from .verify import VerifyReport

__all__ = ["Checkpoint", "InclusionProof", "VerifyReport", "ExportReport", "OfflineReport", "generate_key",
           "load_private_key", "load_public_key", "verify_export"]
