"""Errors about the token cache (bad CLI arguments, unusable directory)."""

from __future__ import annotations

from dlm_git.errors import DlmGitError


class CacheError(DlmGitError):
    """The cache directory cannot be used, or a cache command got a bad argument."""
