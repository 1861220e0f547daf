"""Services (issue 20): the gateway's table of replicas, forwarding, probes, the keeper loop."""
