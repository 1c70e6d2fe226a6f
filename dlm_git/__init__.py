"""dlm-git: Git-native data-and-model versioning for `.dlm` documents."""

__version__ = "0.1.0"
