"""``python -m convergent`` runs the command line."""

from convergent.cli import main

main()
