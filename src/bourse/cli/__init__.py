"""The `bourse` command line: a thin shell over the SDK and the market."""
