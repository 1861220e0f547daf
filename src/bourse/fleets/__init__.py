"""SSH fleets: machines an operator reaches over SSH, made nodes of the exchange by the CLI
(``bourse fleets``). The operator's machine makes the SSH connections — the coordinator never
connects to a node — so this package is the client's: ``hosts`` (parsing, the ssh command
line, ssh's failures), ``script`` (what runs on a host), ``ssh`` (running it), ``wheel`` (the
agent's code), ``join`` (a host joining or leaving, step by step), ``store`` (the fleets file).
"""
