"""Line-level editors that turn one Prometheus scrape into a plausible next one."""

from __future__ import annotations

import re
from collections.abc import Callable

_LINE = re.compile(r"^(?P<name>[^\s{#]+)(?P<labels>\{[^}]*\})? (?P<value>\S+)$")


class Expo:
    """Line-level edits of Prometheus text; every edit must hit at least one line."""

    @staticmethod
    def _edit(text: str, sample: str, contains: str, fn: Callable[[float, str], float]) -> str:
        out, hits = [], 0
        for line in text.splitlines():
            m = _LINE.match(line)
            if m and m["name"] == sample and contains in (m["labels"] or ""):
                new = fn(float(m["value"]), m["labels"] or "")
                line = f"{m['name']}{m['labels'] or ''} {new!r}"
                hits += 1
            out.append(line)
        assert hits, f"no line for {sample} containing {contains!r}"
        return "\n".join(out) + "\n"

    def add(self, text: str, sample: str, amount: float, contains: str = "") -> str:
        return self._edit(text, sample, contains, lambda v, _l: v + amount)

    def set(self, text: str, sample: str, value: float, contains: str = "") -> str:
        return self._edit(text, sample, contains, lambda _v, _l: float(value))

    def observe(self, text: str, name: str, value: float, contains: str = "") -> str:
        """Add one observation ``value`` to histogram ``name`` (buckets, sum, count)."""

        def bucket(v: float, labels: str) -> float:
            le = re.search(r'le="([^"]+)"', labels)
            assert le is not None
            return v + 1.0 if value <= float(le[1]) else v

        text = self._edit(text, f"{name}_bucket", contains, bucket)
        text = self.add(text, f"{name}_sum", value, contains)
        return self.add(text, f"{name}_count", 1.0, contains)

    @staticmethod
    def drop(text: str, *prefixes: str) -> str:
        """Remove every line (samples and comments) mentioning a name starting with a prefix."""
        keep = [
            ln
            for ln in text.splitlines()
            if not any(re.search(rf"(^|\s){re.escape(p)}", ln) for p in prefixes)
        ]
        return "\n".join(keep) + "\n"

    @staticmethod
    def relabel(text: str, old: str, new: str) -> str:
        return text.replace(old, new)
