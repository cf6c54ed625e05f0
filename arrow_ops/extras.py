"""The engines are optional extras: a call that needs one not installed says which to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from ledger import ExtraMissing


def need(module: str, extra: str) -> ModuleType:
    """``module``, imported; ``ExtraMissing`` naming the extra that brings it if it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ExtraMissing(f"{module} is not installed: pip install 'retention-ledger[{extra}]'") from None
