"""Switching the embedding model on an existing store: refused, or every memory re-embedded."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Dense

from app.embedding.backends import SentenceTransformerEncoder
from app.embedding.names import MINILM_NAME
from app.errors import Unavailable
from tests.helpers import all_memories, store

MSGS = [
    {"msg_id": "1", "role": "user", "content": "下周二上午我要去医院体检。"},
    {"msg_id": "2", "role": "user", "content": "We decided to use LanceDB for the memory store."},
]


@pytest.fixture(scope="module")
def small_model(minilm: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str]:
    """A real, different model: MiniLM's encoder with a 128-d projection on top."""
    torch.manual_seed(0)
    dense = Dense(in_features=384, out_features=128, activation_function=torch.nn.Tanh())
    other = SentenceTransformer(modules=[*minilm.model, dense], device="cpu")
    path = tmp_path_factory.mktemp("models") / "minilm-128"
    other.save(str(path))
    return SentenceTransformerEncoder(SentenceTransformer(str(path), device="cpu")), str(path)


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


class TestFromMiniLM:
    async def test_a_minilm_store_is_refused_by_default_and_names_the_setting(
        self, open_client: Any, minilm: Any
    ) -> None:
        async with open_client(with_model=minilm, embedding_model=MINILM_NAME) as client:
            await store(client, MSGS)
        with pytest.raises(Unavailable, match=f"ENGRAM_EMBEDDING_MODEL={MINILM_NAME}"):
            async with open_client():
                pass

    async def test_reembedding_moves_a_minilm_store_to_e5_and_recall_reads_chinese(
        self, open_client: Any, minilm: Any
    ) -> None:
        async with open_client(with_model=minilm, embedding_model=MINILM_NAME) as client:
            await store(client, MSGS)
        async with open_client(reembed_on_model_change=True) as client:
            ready = (await client.get("/readyz")).json()
            assert ready["model"] == "multilingual-e5-small"
            found = (await client.post("/v1/recall", json={
                "namespace": "alice", "query": "when is my medical checkup"})).json()
            assert any("体检" in m["text"] for m in found["memories"])
