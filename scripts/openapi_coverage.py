"""How much of the OpenAPI document a client author can read: fields with a description,
success responses with an example. Builds the app in-process (no model, no data) and prints
the counts, overall and outside app/recall/, with the fields still undescribed.

    .venv/bin/python scripts/openapi_coverage.py [--list]
"""

from __future__ import annotations

import inspect
import sys
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.config import Settings
from app.main import create_app


def _origins() -> dict[str, str]:
    """Component name -> the module of the pydantic model it was generated from."""
    import app

    found: dict[str, str] = {}
    for path in Path(app.__file__).parent.rglob("*.py"):
        module_name = ".".join(path.relative_to(Path(app.__file__).parents[1])
                               .with_suffix("").parts)
        try:
            module = __import__(module_name, fromlist=["_"])
        except Exception:
            continue
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseModel) and \
                    value.__module__ == module_name:
                found.setdefault(name, module_name)
    return found


def _has_example(document: dict[str, Any], media: dict[str, Any]) -> bool:
    if "example" in media or "examples" in media:
        return True
    schema = media.get("schema", {})
    ref = schema.get("$ref")
    if ref:
        schema = document["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return "examples" in schema or "example" in schema


def main() -> None:
    with tempfile.TemporaryDirectory() as data:
        document = create_app(Settings(data_dir=Path(data), _env_file=None)).openapi()  # type: ignore[call-arg]
    origins = _origins()
    fields = missing = fields_out = missing_out = 0
    undescribed: list[str] = []
    for name, schema in document["components"]["schemas"].items():
        recall = origins.get(name, "").startswith("app.recall")
        for prop, spec in schema.get("properties", {}).items():
            fields += 1
            fields_out += not recall
            if "description" not in spec:
                missing += 1
                if not recall:
                    missing_out += 1
                    undescribed.append(f"{name}.{prop} ({origins.get(name, '?')})")
    responses = with_example = responses_out = with_example_out = 0
    for path, item in document["paths"].items():
        for operation in item.values():
            for status, response in operation.get("responses", {}).items():
                media = response.get("content", {}).get("application/json")
                if not status.startswith("2") or media is None:
                    continue
                outside = not path.startswith("/v1/recall")
                responses += 1
                responses_out += outside
                if _has_example(document, media):
                    with_example += 1
                    with_example_out += outside
    print(f"fields: {fields}, without a description: {missing}")
    print(f"fields outside app/recall: {fields_out}, without a description: {missing_out}")
    print(f"JSON success responses: {responses}, with an example: {with_example}")
    print(f"JSON success responses outside /v1/recall: {responses_out}, with an example: "
          f"{with_example_out}")
    if "--list" in sys.argv:
        print("\n".join(undescribed))


if __name__ == "__main__":
    main()
