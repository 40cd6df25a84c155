"""Reports people read at a glance: terminal tables now, HTML later.

Owns: rendering summaries. Reads summaries and records; never imports the capabilities that
wrote them (``probe``, ``bench``, ``gateway``). May import ``records``, ``stats``, ``errors``.
"""
