"""What a client author reads in /openapi.json: response examples that are real responses,
and a description on each field of the routes they call most."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from app.memories import schemas as memories
from app.store import schemas as store
from app.transfer import schemas as transfer

EXAMPLED: list[type[BaseModel]] = [
    memories.MemoryPublic, memories.MemoryList, memories.MemoryMessages, memories.NamespaceList,
    memories.Deleted, memories.Evolution, memories.SessionPublic, memories.SessionList,
    memories.ForgetResult, store.StoreResult, store.JobPublic,
    transfer.ImportResult, transfer.ImportProgress]
# Routes whose success response has an example (the recall routes are documented apart).
DOCUMENTED = ("/v1/store", "/v1/jobs", "/v1/memories", "/v1/namespaces")


@pytest.mark.parametrize("model", EXAMPLED, ids=lambda m: m.__name__)
def test_each_example_is_a_valid_whole_response(model: type[BaseModel]) -> None:
    (example,) = model.model_json_schema()["examples"]
    parsed = model.model_validate(example)
    assert set(parsed.model_dump(mode="json")) == set(example), "every field shown"


async def test_responses_carry_examples_and_fields_descriptions(client: Any) -> None:
    document = (await client.get("/openapi.json")).json()
    schemas = document["components"]["schemas"]
    without = []
    for path, item in document["paths"].items():
        if not path.startswith(DOCUMENTED):
            continue
        for method, operation in item.items():
            media = operation["responses"].get("200", {}).get("content", {}).get(
                "application/json")
            if media is None:
                continue
            schema = schemas[media["schema"]["$ref"].rsplit("/", 1)[1]]
            if "examples" not in schema:
                without.append(f"{method} {path}")
    assert without == []
    for name in ("MemoryPublic", "SessionPublic", "StoreResult", "ImportResult",
                 "ImportProgress", "MessagePublic", "WeightScores", "Deleted"):
        bare = [p for p, spec in schemas[name]["properties"].items()
                if "description" not in spec]
        assert bare == [], f"{name}: {bare}"
