"""The start-up conformance check: every API's conversion (``converts``) proven on each
upstream over a fixed corpus (``corpus``) against the upstream's own rendering (``oracle``),
per shape class (``conformance``), and ``gateway check``'s report (``checkreport``). It
needs every API's conversion, so it sits above the APIs."""
