"""Topic paths that look like the core's and are not: look-alike letters, and invisible characters."""

from __future__ import annotations

CORE = "topics/core.md"
LOOK_ALIKES = {
    "capital": "topics/Core.md",
    "all capitals": "topics/CORE.md",
    "a Cyrillic e": "topics/cor\u0435.md",
    "all Cyrillic": "topics/\u0441\u043e\u0433\u0435.md",
    "full width": "topics/\uff43\uff4f\uff52\uff45.md",
    "a Greek omicron": "topics/c\u03bfre.md",
    "mathematical letters": "topics/\U0001d41c\U0001d428\U0001d42b\U0001d41e.md",
}


INVISIBLE = {
    "zero-width space": "\u200b",
    "zero-width joiner": "\u200d",
    "word joiner": "\u2060",
    "byte order mark": "\ufeff",
    "soft hyphen": "\u00ad",
    "right-to-left override": "\u202e",
    "variation selector": "\ufe0f",
    "tag letter": "\U000e0041",
    "Hangul filler": "\u3164",
    "Mongolian vowel separator": "\u180e",
}
