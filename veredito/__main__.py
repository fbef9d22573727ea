"""``python -m veredito``: the same command line as the ``veredito`` script."""

from __future__ import annotations

from veredito.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
