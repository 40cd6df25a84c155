"""Root conftest: only what must reach both ``tests/`` and the doctests in ``src/ttftscope``."""

pytest_plugins = ["tests.doctests"]
