"""Workspace paths: the fast relative link agrees with ``posixpath.relpath`` on every pair of workspace paths."""

from __future__ import annotations

import posixpath
from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st

from scriptorium.workspace.paths import relative_link, resolve_link

SEGMENT = st.sampled_from(["topics", "sources", "a", "b", "core.md", "x y", "é", "m-1.md", "area-1"])
PATH = st.lists(SEGMENT, min_size=1, max_size=5).map("/".join)


@given(PATH, PATH)
def test_relative_link_is_relpath_without_its_abspath_calls(from_file: str, to_file: str) -> None:
    expected = quote(posixpath.relpath(to_file, posixpath.dirname(from_file) or "."), safe="/")
    assert relative_link(from_file, to_file) == expected
    assert resolve_link(from_file, relative_link(from_file, to_file)) == posixpath.normpath(to_file)


TARGET = st.lists(st.sampled_from(["..", ".", "", "a", "b.md", "x%20y", "%2Fetc", "sources"]), max_size=6).map("/".join)


@given(PATH, TARGET)
def test_resolve_link_is_normpath_of_the_join(from_file: str, target: str) -> None:
    from urllib.parse import unquote

    if target.startswith("/"):
        assert resolve_link(from_file, target) is None
        return
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(from_file), unquote(target)))
    expected = None if joined.startswith("../") or joined == ".." else joined
    assert resolve_link(from_file, target) == expected
