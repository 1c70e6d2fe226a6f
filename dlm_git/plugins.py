"""No third-party plugin runs inside a dlm-git process.

Invariant: pydantic, on the first model it builds in a process, imports every `pydantic`
entry point that any installed distribution declares, and runs it on every validation
(pydantic 2.x, `pydantic.plugin._loader.get_plugins`). That is code dlm-git did not
choose, inside the process that reaches a verdict, and the verifier trusts only its own
code and configuration. So every dlm-git entry (the CLI's `main`, every git hook's
`run_hook`) switches plugin loading off first (`refuse_plugins`) through pydantic's own
switch, `PYDANTIC_DISABLE_PLUGINS`, which pydantic reads at each model build: set in this
process's environment, it holds for every model built later and for the child
interpreters dlm-git starts (training, replays, the pre-push hook's queries), which are
dlm-git too. It also spares each start the scan of every installed distribution's
metadata (about 10 ms).
"""

from __future__ import annotations

import os

SWITCH = "PYDANTIC_DISABLE_PLUGINS"
ALL = "__all__"
"""pydantic's value for "load none of them" (it also takes `1` and `true`)."""


def refuse_plugins() -> None:
    """Switch pydantic plugin loading off for this process and its children (whatever
    the caller's environment asked for)."""
    os.environ[SWITCH] = ALL
