"""Reports people can read at a glance: terminal tables now, HTML later."""

from ttftscope.report.terminal import breakdown_table, print_probe_summary

__all__ = ["breakdown_table", "print_probe_summary"]
