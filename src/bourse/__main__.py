"""``python -m bourse`` is the ``bourse`` command."""

from bourse.cli.main import main

main()
