"""`dlm-git fsck`: is every cache object the history relies on what its name says it is?
(`run` checks and repairs, `dvc` and `tokens` check one cache each, `repair` moves files
aside, `report` holds the outcome, `render` prints it.)"""
