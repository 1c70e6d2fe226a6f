"""Looking back over a repository's history: `diff` (what changed between two adapters
and their inputs), `log` (a document's adapter lineage) and `fsck` (a cache you can trust).
Reads git objects through `gitio` and DVC's records through `dvcfiles`; never a checkout."""
