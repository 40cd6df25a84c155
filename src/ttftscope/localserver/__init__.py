"""A real local vLLM (CPU build) serving a tiny random-weight model with a real tokenizer.

Owns: installing vLLM into its own cached venv (``install``), building the tiny model
(``model``, with its build script in ``data/``), starting, finding and stopping the server
(``process``), vLLM's render servers of each version (``oracle`` installs, ``render``
runs), and how the long steps report progress (``progress``). May import ``config``,
``errors``, ``assets`` and ``localstate`` (its state file); never another capability.
"""
