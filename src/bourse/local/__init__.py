"""A whole exchange on one machine: a coordinator and agents as background processes."""
