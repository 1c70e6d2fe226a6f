"""The DVC pipeline dlm-git brings to a repository: stage templates and `init`."""
