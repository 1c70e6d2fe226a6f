"""The tokenized-section cache: unchanged rows are never tokenized twice.

Rooms: `entry` and `pack` (the on-disk formats), `layout` (where files live, the one
walk), `store` (`TokenCache`: entries read and written), `index` (the SQLite index:
sizes, last access, eviction, the runs' log, prune and clear), `check` (fsck's question:
is a file what its name says).
"""
