"""Comments say their reason themselves: none cites a document outside the repository ("spec 07")."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_comment_or_docstring_cites_an_outside_spec() -> None:
    cited = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for folder in ("scriptorium", "workers", "producers", "schemas")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if not path.is_symlink() and "scriptorium/workers" not in path.as_posix()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bspec \d+", line)
    ]
    assert not cited, "\n".join(cited)
