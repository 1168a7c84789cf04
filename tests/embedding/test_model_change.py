"""Switching the embedding model on an existing store: refused, or every memory re-embedded."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Dense

from app.errors import Unavailable
from tests.helpers import all_memories, store

MSGS = [
    {"msg_id": "1", "role": "user", "content": "下周二上午我要去医院体检。"},
    {"msg_id": "2", "role": "user", "content": "We decided to use LanceDB for the memory store."},
]


@pytest.fixture(scope="module")
def small_model(model: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str]:
    """A real, different model: the bundled encoder with a 128-d projection on top."""
    torch.manual_seed(0)
    dense = Dense(in_features=384, out_features=128, activation_function=torch.nn.Tanh())
    other = SentenceTransformer(modules=[*model, dense], device="cpu")
    path = tmp_path_factory.mktemp("models") / "minilm-128"
    other.save(str(path))
    return SentenceTransformer(str(path), device="cpu"), str(path)


class TestModelChange:
    async def test_another_model_is_refused_with_a_clear_error(
        self, open_client: Any, small_model: tuple[Any, str]
    ) -> None:
        async with open_client() as client:
            await store(client, MSGS)
        other, path = small_model
        with pytest.raises(Unavailable, match="ENGRAM_REEMBED_ON_MODEL_CHANGE"):
            async with open_client(with_model=other, embedding_model=path):
                pass
        async with open_client() as client:  # the original model still opens the store
            assert len(await all_memories(client)) == 1

    async def test_reembedding_switches_every_memory_to_the_new_model(
        self, open_client: Any, small_model: tuple[Any, str]
    ) -> None:
        async with open_client() as client:
            await store(client, MSGS, session_id="a")
            await store(client, MSGS, session_id="b")
        other, path = small_model
        async with open_client(with_model=other, embedding_model=path,
                               reembed_on_model_change=True) as client:
            ready = (await client.get("/readyz")).json()
            assert ready["embedding_dim"] == 128 and ready["model"] == path
            assert len(await all_memories(client)) == 2
            more = await store(client, MSGS, session_id="c")  # new memories: new model
            assert more["new"] == 2
        async with open_client(with_model=other, embedding_model=path) as client:
            assert len(await all_memories(client)) == 3  # recorded: no refusal next time
