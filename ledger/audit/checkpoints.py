"""Checkpoints and proofs: what an auditor keeps outside the ledger, and checks it against (R16).

A checkpoint is the log's head at one moment: how many events (``seq``), the time
of the last one, its chain hash (``head``), and the RFC 6962 Merkle tree hash
(``root``) whose leaves are the event hashes in sequence order. Kept somewhere the
ledger's writers cannot reach, it pins the log: ``verify(against=checkpoint)`` proves
that today's log begins with exactly those events (a consistency proof), and an
inclusion proof shows that one event is among them.

Signed with an Ed25519 key, it also proves who took it. The signature covers these
bytes (UTF-8, each line ending in a newline)::

    retention-ledger checkpoint 1
    <seq in decimal>
    <time of the last event, microseconds since the Unix epoch, in decimal>
    <head, 64 lower-case hex digits>
    <root, 64 lower-case hex digits>

The private key lives in a file outside the ledger (PEM, PKCS #8; ``generate_key``
writes one) and is never stored in it; verifying needs only the public key.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Union

import attrs
import orjson

from ..chain import root_from_inclusion
from ..clock import iso, parse_time, to_micros
from ..errors import CheckpointInvalid, InvalidArgument
from . import outputs

if TYPE_CHECKING:  # cryptography is imported where keys are used: opening a ledger need not pay for it
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

FORMAT = "retention-ledger checkpoint 1"

KeyLike = Union["Ed25519PrivateKey", "Ed25519PublicKey", str, "os.PathLike[str]", bytes]


def _hex64(name: str) -> Any:
    def check(_instance: object, _attribute: object, value: object) -> None:
        if not (isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)):
            raise CheckpointInvalid(f"a checkpoint's {name} must be 64 lower-case hex digits, got {value!r}")
    return check


def _seq(_instance: object, _attribute: object, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CheckpointInvalid(f"a checkpoint's seq must be a whole number >= 0, got {value!r}")


@attrs.frozen
class Checkpoint:
    seq: int = attrs.field(validator=_seq)
    """How many events it covers (the sequence number of the last one)."""
    time: datetime
    """The time of its last event (the Unix epoch for an empty log)."""
    head: str = attrs.field(validator=_hex64("head"))
    """The chain hash of event ``seq``: 64 hex digits (all zeros for an empty log)."""
    root: str = attrs.field(validator=_hex64("root"))
    """The RFC 6962 tree hash over the first ``seq`` event hashes."""
    signature: str | None = None
    """Ed25519 signature of ``message()``, hex; None if unsigned."""
    public_key: str | None = None
    """The raw public key that signed it, hex: a hint for the auditor, who must check it is theirs."""

    @property
    def time_micros(self) -> int:
        return to_micros(self.time)

    def message(self) -> bytes:
        """The bytes a signature covers (see the module docstring)."""
        return f"{FORMAT}\n{self.seq}\n{self.time_micros}\n{self.head}\n{self.root}\n".encode()

    def signed(self, key: KeyLike) -> Checkpoint:
        from cryptography.hazmat.primitives import serialization
        private = load_private_key(key)
        raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return attrs.evolve(self, signature=private.sign(self.message()).hex(), public_key=raw.hex())

    def check_signature(self, key: KeyLike) -> None:
        """Raise ``CheckpointInvalid`` unless ``key`` (the auditor's public key) signed this."""
        from cryptography.exceptions import InvalidSignature
        public = load_public_key(key)
        if self.signature is None:
            raise CheckpointInvalid(f"checkpoint #{self.seq} is not signed, so it cannot be checked against a "
                                    "public key; take signed checkpoints with checkpoint(key=...)")
        try:
            public.verify(bytes.fromhex(self.signature), self.message())
        except (InvalidSignature, ValueError):
            raise CheckpointInvalid(
                f"checkpoint #{self.seq}'s signature does not verify with the public key given: it was signed "
                "with another key, or the checkpoint was changed after signing") from None

    def to_json(self) -> str:
        return orjson.dumps({
            "format": FORMAT, "seq": self.seq, "time": iso(self.time_micros), "head": self.head,
            "root": self.root, "signature": self.signature, "public_key": self.public_key,
        }, option=orjson.OPT_INDENT_2).decode() + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> Checkpoint:
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise CheckpointInvalid(f"not a checkpoint: the text is not JSON ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CheckpointInvalid(f"not a checkpoint: expected JSON with \"format\": \"{FORMAT}\"")
        unknown = set(data) - {"format", "seq", "time", "head", "root", "signature", "public_key"}
        if unknown:
            raise CheckpointInvalid(f"a checkpoint has no field(s) {', '.join(sorted(unknown))}")
        if "time" in data and not isinstance(data["time"], str):
            raise CheckpointInvalid(f"a checkpoint's time must be ISO 8601 text, got {data['time']!r}")
        try:
            when = parse_time(data["time"])
            return cls(data["seq"], when, data["head"], data["root"], _optional_hex(data, "signature"),
                       _optional_hex(data, "public_key"))
        except KeyError as exc:
            raise CheckpointInvalid(f"a checkpoint must have a {exc.args[0]!r} field") from None
        except (ValueError, TypeError) as exc:
            if isinstance(exc, CheckpointInvalid):
                raise
            raise CheckpointInvalid(f"a checkpoint field is malformed: {exc}") from None

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Checkpoint:
        try:
            return cls.from_json(Path(path).read_bytes())
        except OSError as exc:
            raise InvalidArgument(f"cannot read the checkpoint {os.fspath(path)}: {exc.strerror or exc}") from None

    def write(self, path: str | os.PathLike[str], *, overwrite: bool = False, protected: Iterable[str] = ()) -> Path:
        """Write it to ``path``: an existing file only with ``overwrite``, the ``protected`` ones (the
        ledger's files, the signing key) never (``outputs.target``)."""
        out = outputs.target(path, "checkpoint", overwrite=overwrite, protected=protected)
        try:
            out.write_text(self.to_json())
        except OSError as exc:
            raise InvalidArgument(f"cannot write the checkpoint to {out}: {exc.strerror or exc}") from None
        return out


def blame_edited_seq(cp: Checkpoint, hashes: list[bytes]) -> None:
    """``CheckpointInvalid`` if the checkpoint's head is the hash of an event other than its seq's:
    its seq was edited (the log has that event where it was). A head found nowhere leaves the
    verdict to the log's checks: rewritten, or truncated."""
    if not cp.seq or (cp.seq <= len(hashes) and hashes[cp.seq - 1].hex() == cp.head):
        return
    head = bytes.fromhex(cp.head)
    found = next((i + 1 for i, h in enumerate(hashes) if h == head), None)
    if found is not None:
        raise CheckpointInvalid(f"the checkpoint says it ends at event #{cp.seq}, but its head is the hash of event "
                                f"#{found}: the checkpoint's seq was edited (the log holds that event where it was)")


def _optional_hex(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise CheckpointInvalid(f"a checkpoint's {key} must be hex text or null, got {value!r}")
    bytes.fromhex(value)
    return value


@attrs.frozen
class InclusionProof:
    """RFC 6962's audit path for one event in a checkpoint's tree: enough, with the event's
    hash, to recompute the checkpoint's root (and so prove the event is in it)."""

    seq: int
    event_hash: str
    tree_size: int
    path: tuple[str, ...]

    def verify(self, checkpoint: Checkpoint, *, event_hash: str | None = None) -> bool:
        """Whether this path leads from the event (``event_hash``, default the one it was made
        for) to the checkpoint's root."""
        if checkpoint.seq != self.tree_size:
            return False
        try:
            entry = bytes.fromhex(event_hash if event_hash is not None else self.event_hash)
            path = [bytes.fromhex(p) for p in self.path]
        except ValueError:
            return False
        root = root_from_inclusion(self.seq - 1, self.tree_size, entry, path)
        return root is not None and root.hex() == checkpoint.root

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "event_hash": self.event_hash, "tree_size": self.tree_size,
                "path": list(self.path)}


# --- keys ------------------------------------------------------------------------------------

def generate_key(path: str | os.PathLike[str]) -> Path:
    """Write a new Ed25519 private key to ``path`` (PEM, readable by its owner only) and its public
    key beside it (``<path>.pub``); returns the public key's path. Refuses to overwrite a key."""
    target = outputs.path_argument(path, "key")
    public = target.with_name(target.name + ".pub")
    for p in (target, public):
        if p.exists():
            raise InvalidArgument(f"{p} exists; refusing to overwrite a key (choose another path)")
    outputs.target(target, "key")  # its folder made if missing (keys/ in a fresh checkout)
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
        public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                         serialization.PublicFormat.SubjectPublicKeyInfo))
    except OSError as exc:
        raise InvalidArgument(f"cannot write the key to {target}: {exc.strerror or exc}") from None
    return public


def _key_bytes(key: object, what: str) -> bytes:
    if isinstance(key, bytes):
        return key
    if not isinstance(key, (str, os.PathLike)):
        raise InvalidArgument(f"a {what} key is an Ed25519 key object, a PEM file's path or its bytes, got "
                              f"{type(key).__name__} {key!r}")
    if "\x00" in os.fspath(key):
        raise InvalidArgument(f"the {what} key path {os.fspath(key)!r} contains a NUL character")
    try:
        return Path(key).read_bytes()
    except OSError as exc:
        raise InvalidArgument(f"cannot read the {what} key file {os.fspath(key)}: {exc.strerror or exc}") from None


def load_private_key(key: KeyLike) -> Ed25519PrivateKey:
    """An Ed25519 private key from a key object, a PEM file's path, or its bytes (PEM or raw 32)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
    if isinstance(key, Ed25519PrivateKey):
        return key
    if isinstance(key, Ed25519PublicKey):
        raise InvalidArgument("signing needs the private key; a public key was given")
    data = _key_bytes(key, "private")
    try:
        if len(data) == 32:
            return Ed25519PrivateKey.from_private_bytes(data)
        loaded = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise InvalidArgument(f"not an unencrypted Ed25519 private key (PEM, PKCS #8): {exc}") from None
    if not isinstance(loaded, Ed25519PrivateKey):
        raise InvalidArgument(f"checkpoints are signed with Ed25519 keys, not {type(loaded).__name__}")
    return loaded


def load_public_key(key: KeyLike) -> Ed25519PublicKey:
    """An Ed25519 public key from a key object (a private key gives its public half), a PEM file's
    path, or its bytes (PEM, or the raw 32 bytes)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
    if isinstance(key, Ed25519PublicKey):
        return key
    if isinstance(key, Ed25519PrivateKey):
        raise InvalidArgument("that is a private key: checking a signature needs only the signer's public key")
    data = _key_bytes(key, "public")
    try:
        if len(data) == 32:
            return Ed25519PublicKey.from_public_bytes(data)
        if b"PRIVATE KEY" in data:
            raise InvalidArgument("that is a private key: checking a signature needs only the signer's public key "
                                  "(the .pub file beside it); an auditor should never hold the private one")
        loaded = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise InvalidArgument(f"not an Ed25519 public key (PEM): {exc}") from None
    if not isinstance(loaded, Ed25519PublicKey):
        raise InvalidArgument(f"checkpoints are signed with Ed25519 keys, not {type(loaded).__name__}")
    return loaded
