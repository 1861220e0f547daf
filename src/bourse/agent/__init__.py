"""The node agent: runs jobs on a machine and reports them to the coordinator."""
