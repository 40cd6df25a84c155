"""Layered settings: defaults, ``settings.json``, ``config.toml``, profiles, environment, flags.

Owns: the schema (``schema``), reading each layer with positions (``sources``), layering and
validation (``loader``), secret masking (``redact``) and git hygiene (``git``). May import
``errors`` only.
"""
