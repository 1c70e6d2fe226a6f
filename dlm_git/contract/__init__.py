"""The contract: one list of checks that the pre-commit hook, `verify COMMIT`, `verify
--worktree` and `log` all run, as git's `fsck.c` runs one list for `git fsck` and for
`receive.fsckObjects`.

Rooms: `outcome` (a check's state: ok, failed, absent), `table` (every check: its stable
id, its default severity, what it compares, how to fix it), `shapes` (a manifest read as
raw JSON, checked field by field), `records` (the record checks: lock and manifest against
each other and the `.dlm`), `sources` (sources and sections re-expanded), `adapter` (the
adapter's bytes, the base, `dvc.lock`), `signature` (`dlm.sig`), `commit_time` (what only a
commit being made is judged by: drift against HEAD, determinism).

Invariant: a new check goes in one place, a row of `table.TABLE` and the function that
sets its state; every reader runs it. Nothing here imports pydantic, torch or DVC at
module level (the git hooks use it).
"""
