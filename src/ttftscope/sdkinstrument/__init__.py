"""``instrument(client)`` for the official openai SDK: per-call records and request logs.

A capability of its own: it writes what ``doctor`` and ``report`` read (the records' shared
schema, ``requests.jsonl``) and uses none of the doctor's rules. Owns: the wrappers and the
handle (``wrap``), what a call is and how its stream is timed in place (``calls``), what a
call becomes (``record``: classification, client times; the server's view and checks are
``ttftscope.decompose``'s), the ``/metrics`` windows and tokenizer it reads (``sources``),
its options from the settings and the client (``options``), the background worker that does
all work outside the call (``worker``) and, when vLLM's spans are read, the shared trace
receiver and the in-order join of each record with its span (``spanjoin``).

Named ``sdkinstrument`` rather than ``instrument``: a subpackage ``ttftscope.instrument``
would replace the public function ``ttftscope.instrument`` as an attribute of the package
once imported. May import ``decompose``, ``localstate``, ``client``, ``metrics``,
``tokenization``, ``tracing``, ``records``, ``config``, ``errors``, ``stats``; never another
capability or ``cli``.
"""
