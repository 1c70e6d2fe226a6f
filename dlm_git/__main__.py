from dlm_git.cli import entry

entry()
