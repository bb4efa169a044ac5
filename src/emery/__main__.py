"""``python -m emery`` runs the command line."""

from emery.cli.app import main

main()
