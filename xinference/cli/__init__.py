"""The ``xinference`` command's groups that have outgrown ``deploy/cli.py``, one module per group."""
