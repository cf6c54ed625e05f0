"""``python -m ledger.audit verify EXPORT CHECKPOINT [--public-key K]``: the offline verifier; and
``python -m ledger.audit prove-deleted PROOF EXPORT CHECKPOINT [--public-key K]``: a deletion proof,
or a bundle of them (``retention-ledger prove-deleted --keys-from``), checked against them (R20); and
``python -m ledger.audit prove-erasure BUNDLE EXPORT CHECKPOINT [--public-key K]``: an erasure
request's bundle (``Ledger.prove_erasure``), the request and every file of it, deleted or found
absent by the run that looked for it (R25).

Exit status 0 when the export holds a sound chain that extends the checkpoint (and the
signature verifies with the key given), 1 when it does not (one line says why), 2 for
a usage error (as the ``retention-ledger`` command: ``ok: ...`` on stdout, or one line
``error: <Type>: <message>`` on stderr). It never opens an SQLite file.
"""

from __future__ import annotations

import argparse
import sys

from ..clock import iso, iso_utc
from ..errors import InvalidArgument, LedgerError
from .checkpoints import Checkpoint
from .erasures import ErasureProof
from .offline import check_statement, verify_deletions, verify_erasure, verify_export
from .receipts import DeletionProof, DeletionProofs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledger.audit",
                                     description="Check a ledger export against a checkpoint, offline.")
    commands = parser.add_subparsers(dest="command", required=True)
    check = _checked(commands.add_parser("verify", help="Check an export (JSON lines or Parquet) against a "
                                                        "checkpoint."), "the checkpoint file (JSON)")
    deleted = commands.add_parser("prove-deleted", help="Check a deletion proof against an export and a checkpoint.")
    deleted.add_argument("proof", help="the proof file (retention-ledger prove-deleted KEY --out FILE), or a bundle "
                                       "(prove-deleted --keys-from KEYS --out FILE)")
    _checked(deleted, "the checkpoint file (JSON), taken after the receipt")
    erased = commands.add_parser("prove-erasure", help="Check an erasure request's bundle against an export and a "
                                                        "checkpoint: the request recorded, every file of it deleted.")
    erased.add_argument("bundle", help="the bundle (Ledger.prove_erasure(ID).write(FILE))")
    _checked(erased, "the checkpoint file (JSON), taken after the last deletion")
    erased.add_argument("--keys", default=None, metavar="STATEMENT",
                        help="the request's statement (retention-ledger erasure ID --statement FILE, kept while the "
                             "request was open): checked against the commitment the log records, and said")
    args = parser.parse_args(argv)
    try:
        cp = Checkpoint.read(args.checkpoint)
        if args.command == "prove-deleted":
            proofs = DeletionProofs.read(args.proof)
            report = verify_deletions(proofs, args.export, cp, public_key=args.public_key)
        elif args.command == "prove-erasure":
            bundle = ErasureProof.read(args.bundle)
            report = verify_erasure(bundle, args.export, cp, public_key=args.public_key)
            statement = None if args.keys is None else check_statement(bundle, _read_bytes(args.keys))
        else:
            report = verify_export(args.export, cp, public_key=args.public_key)
    except LedgerError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if args.command == "prove-erasure":
        request = bundle.request
        print(f"ok: erasure request {bundle.request_id} of {', '.join(request.tables)} (event #{request.seq}, "
              f"{iso(request.time)}): all {len(bundle.files)} files of its set {_gone(bundle)}, each proof in the "
              f"export's chain and covered by checkpoint #{cp.seq}; {_signed(report.signature_checked, cp)}"
              + ("" if statement is None else f"; the statement given is the one it committed to: {_said(statement)}"))
        return 0
    if args.command == "prove-deleted":
        print(f"ok: {_deleted(proofs.proofs)}, in the export's chain and covered by checkpoint #{cp.seq}; "
              f"{_signed(report.signature_checked, cp)}")
        return 0
    print(f"ok: {report.events} events, chain intact; checkpoint #{cp.seq} ({iso_utc(cp.time)}) matches: "
          f"head {cp.head[:16]}..., root {cp.root[:16]}...; {_signed(report.signature_checked, cp)}")
    return 0


def _checked(command: argparse.ArgumentParser, checkpoint: str) -> argparse.ArgumentParser:
    """A command's export, checkpoint and signer's key: what each checks against."""
    command.add_argument("export", help="the export file (retention-ledger export)")
    command.add_argument("checkpoint", help=checkpoint)
    command.add_argument("--public-key", default=None,
                         help="the signer's Ed25519 public key (PEM): the checkpoint's signature must verify")
    return command


def _deleted(proofs: tuple[DeletionProof, ...]) -> str:
    """What a bundle's proofs say, in words (one proof: the key, its run and when)."""
    if len(proofs) == 1:
        [p] = proofs
        return (f"{p.key} ({p.size} bytes) was deleted by vacuum run {p.run_id}, recorded {iso_utc(p.deleted_at)} "
                f"(event #{p.seq})")
    runs = sorted({p.run_id for p in proofs})
    return (f"all {len(proofs)} keys were deleted, by " +
            (f"vacuum run {runs[0]}" if len(runs) == 1 else f"{len(runs)} vacuum runs ({', '.join(runs)})") +
            f", recorded by {iso_utc(max(p.deleted_at for p in proofs))}, each proof")


def _gone(bundle: ErasureProof) -> str:
    """How a bundle's files went, in words: deleted, or some found absent by the run that looked for
    them (no run recorded deleting those: a run it took over deleted them and was stopped first)."""
    absent = bundle.proofs.found_absent
    if not absent:
        return "deleted"
    runs = sorted({a.run_id for a in absent})
    return (f"gone: {len(bundle.files) - len(absent)} deleted, {len(absent)} found absent by "
            + (f"vacuum run {runs[0]}" if len(runs) == 1 else f"vacuum runs {', '.join(runs)}")
            + f", recorded by {iso_utc(max(a.found_absent_at for a in absent))} (no run recorded deleting "
            + ("it: the run that one took over was stopped before it wrote its deletion down)" if len(absent) == 1 else
               "them: the runs those took over were stopped before they wrote their deletions down)"))


def _said(statement: dict[str, object]) -> str:
    """What a statement names, in words: its predicate, or its keys (the first few) and columns."""
    tables = statement["tables"]
    assert isinstance(tables, dict)
    if "predicate" in statement:
        return f"the rows {statement['predicate']!r}"
    keys = statement["keys"]
    assert isinstance(keys, list)
    shown = ", ".join(map(str, keys[:5])) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
    return f"{len(keys)} key{'' if len(keys) == 1 else 's'} ({shown}) in " + \
        ", ".join(f"{t}.{c}" for t, c in sorted(tables.items()))


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as source:
            return source.read()
    except OSError as exc:
        raise InvalidArgument(f"cannot read the statement {path}: {exc.strerror or exc}") from None


def _signed(checked: bool, cp: Checkpoint) -> str:
    return ("signature verified with the key given" if checked else
            "signed, signature NOT checked (no --public-key)" if cp.signature else "unsigned")


if __name__ == "__main__":
    sys.exit(main())
