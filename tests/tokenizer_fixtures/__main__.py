"""``python -m tests.tokenizer_fixtures [--family NAME]... [--out DIR]``: build and list them."""

from tests.tokenizer_fixtures.fixtures import main

raise SystemExit(main())
