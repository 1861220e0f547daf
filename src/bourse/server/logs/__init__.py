"""Jobs' logs on their way in and out: the coordinator's log rate limit (``meter``) and ended jobs'
logs moved into the store (``archive``)."""
