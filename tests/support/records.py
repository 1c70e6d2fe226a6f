"""Record samples shared by unit tests: a dvc.lock of several documents."""

from __future__ import annotations

BIG_DVC_LOCK = b"""schema: '2.0'
stages:
  base:
    cmd: dlm-git base build --out bases/tiny
    outs:
    - path: bases/tiny
      hash: md5
      md5: 074602d49c8a19cc9c331f8e839634da.dir
  verify@doc:
    cmd: dlm-git verify --worktree --doc doc
    deps:
    - path: doc/adapter
      hash: md5
      md5: 0123456789abcdef0123456789abcdef.dir
  train@doc:
    cmd: dlm-git train doc --tiny-dir bases/tiny --quiet --lock-mode default
      --device cpu --threads 2
    deps:
    - path: bases/tiny
      md5: 074602d49c8a19cc9c331f8e839634da.dir
    outs:
    - path: doc/adapter
      hash: md5
      md5: 0123456789abcdef0123456789abcdef.dir
      size: 10
      nfiles: 2
    - path: doc/dlm.lock
      hash: md5
      md5: ffffffffffffffffffffffffffffffff
  train@other:
    cmd: dlm-git train other
    outs:
    - path: other/adapter
      hash: md5
      md5: 22222222222222222222222222222222.dir
"""
