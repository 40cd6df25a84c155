"""``/v1/completions``: a text prompt encoded incrementally, its ids spliced in."""
