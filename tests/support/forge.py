"""The falsifiability forger (`tests/falsifiability/forgery.py`) as one shared module, for
the suites outside tests/falsifiability that build on its trained repository."""

from __future__ import annotations

from types import ModuleType

from tests.falsifiability import forgery


def load_forgery() -> ModuleType:
    return forgery
