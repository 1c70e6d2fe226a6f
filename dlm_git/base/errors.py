"""Errors about base models: unknown specs, missing weights, unusable directories."""

from __future__ import annotations

from dlm_git.errors import DlmGitError


class BaseModelError(DlmGitError):
    """A base model spec is invalid or the base cannot be found or loaded."""


class BaseNotAvailableError(BaseModelError):
    """The spec is valid but the weights are not on this machine."""
