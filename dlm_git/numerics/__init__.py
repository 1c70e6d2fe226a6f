"""Numerics: which kernels a training run may use, how a process is pinned to them, what
a run records of them, and what this dlm-git promises from that record.

The rooms, from the bottom up (each states its invariant; import from the room itself,
this package exposes nothing of its own so that importing one room loads only what it
needs):
- `table`: the profile table, the one place that names profiles (data only);
- `probe`: this machine (architecture, CPU flags, GPU libraries) and which profiles it
  can run;
- `flags`: what `determinism_flags` in a lock may hold (the hooks use it);
- `judge`: the determinism class and whether a replay should reproduce the bits (the
  pre-commit hook uses it);
- `activate`: the kernel variables forced before torch initialises, and whether this
  process can still honour them;
- `plan`: choosing the profile and thread count before torch is imported;
- `record`: what a run records of its numerical environment, read from torch;
- `prepare`: the single place that seeds and pins a training process.

Invariant of the whole: nothing imports torch at module level; only `record`, `prepare`
and the torch-reading probes import it, inside the functions that need it.
"""
