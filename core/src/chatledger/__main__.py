"""Run the ``chatledger`` command: ``python -m chatledger --help``."""

from chatledger.cli import main

raise SystemExit(main())
