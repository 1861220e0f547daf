"""Example apps shipped with bourse, so that ``bourse demo`` finds them in any installation;
the repository's ``examples/`` folder holds the same files (a test keeps them identical)."""
