"""The ``xinference`` command: the click group in ``main``, shared options and output helpers, one module per
group of commands. Importing this package imports no command module (``python -m xinference.cli`` does)."""
