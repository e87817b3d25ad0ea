"""Write the JSON Schemas of the bus payloads to ``schemas/json/`` (``python -m scriptorium.schemas.export``)."""

from __future__ import annotations

import json
from pathlib import Path

from scriptorium.schemas.events import json_schemas

OUT = Path(__file__).resolve().parent / "json"


def render() -> dict[str, str]:
    return {name: json.dumps(schema, indent=2, sort_keys=True) + "\n" for name, schema in json_schemas().items()}


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, text in render().items():
        (OUT / name).write_text(text)
        print(OUT / name)


if __name__ == "__main__":
    main()
