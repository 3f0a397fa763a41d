"""``python -m xinference.cli``: the ``xinference`` command without its console script."""

from __future__ import annotations

from xinference.cli.main import main

if __name__ == "__main__":
    main()
