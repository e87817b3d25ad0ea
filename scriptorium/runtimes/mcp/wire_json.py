"""JSON for the MCP front (:mod:`scriptorium.runtimes.mcp.front`) without importing :mod:`json`.

The front answers a runtime's handshake before anything else loads, and a runtime waits for that answer
before its first model request. Importing :mod:`json` brings :mod:`re` and :mod:`enum` with it: about
10 ms of a 27 ms start here. The parsing and the encoding themselves are the standard library's own C
accelerator (``_json``, what :mod:`json` uses too), set up as :class:`json.JSONDecoder` and
:class:`json.JSONEncoder` set it up with their defaults; where it is missing, :mod:`json` does the work.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's (see above)
if TYPE_CHECKING:
    from typing import Any, ClassVar

try:
    import _json
except ImportError:  # an interpreter without the accelerator
    _json = None  # type: ignore[assignment]

_WHITESPACE = " \t\n\r"


class _Decoding:
    """What ``_json.make_scanner`` reads from a decoder: :class:`json.JSONDecoder`'s defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo: ClassVar[dict[str, str]] = {}

    @staticmethod
    def parse_constant(name: str) -> float:
        return {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}[name]


def _refuse(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


if _json is not None:
    _scan = _json.make_scanner(_Decoding())  # type: ignore[arg-type]  # (reads the attributes above)
    _encode = _json.make_encoder(None, _refuse, _json.encode_basestring_ascii, None, ":", ",", False, False, True)


def loads(text: str | bytes) -> Any:
    """:func:`json.loads`; ValueError for what is not one JSON value."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if _json is None:
        import json

        return json.loads(text)
    text = text.strip(_WHITESPACE)
    try:
        value, end = _scan(text, 0)
    except StopIteration as exc:
        raise ValueError(f"not JSON at {exc.value}") from None
    if end != len(text):
        raise ValueError(f"extra data at {end}")
    return value


def dumps(value: Any) -> str:
    """:func:`json.dumps` with ``separators=(",", ":")`` (ASCII, compact)."""
    if _json is None or isinstance(value, str):
        import json

        return json.dumps(value, separators=(",", ":"))
    return "".join(_encode(value, 0))
