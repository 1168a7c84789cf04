"""multilingual-e5-small's calibration (app/embedding/profiles.py), through POST /v1/recall.

The sentences here were written for the purpose, Chinese, English and mixed; none comes from
evaluation data. e5's cosines sit in a narrow band (unrelated about 0.75-0.86, a Chinese
question higher against any Chinese text than an English one against English text), so the
thresholds that suit MiniLM (floor 0.05, ceiling 0.55) would pass everything.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.embedding import profiles
from app.embedding.names import E5_NAME, MINILM_NAME
from app.scripts import has_han
from tests.conftest import make_settings
from tests.embedding.calibration_pairs import CROSS_LINGUAL as ASKED_ACROSS
from tests.embedding.calibration_pairs import PAIRS
from tests.helpers import store
from tests.recall.test_recall_api import recall, store_notes

NOTES = [
    "我最喜欢吃火锅，尤其是重庆的麻辣锅底。",
    "My sister Anna lives in Berlin and works as a nurse.",
    "我家的猫叫小白，今年三岁了，特别怕打雷。",
    "The dentist appointment moved to Thursday at 9am.",
    "我在一家银行做柜员，每天九点上班。",
    "I started learning the piano last spring, mostly jazz standards.",
    "周末我们去爬了香山，看到了很多红叶。",
    "We picked LanceDB as the vector store for the memory service.",
    "下周二上午我要去医院做体检，前一天晚上不能吃东西。",
    "Our team standup is every Monday at 10, 周一上午十点开站会。",
]


UNANSWERED = ["我的护照什么时候过期", "when does my passport expire", "我的血型是什么",
              "what's my blood type", "明天天气怎么样", "what car do I drive", "我开什么车",
              # Chinese around English words: a Chinese question against the Chinese notes,
              # read on that pair's band (score.py), not the English one.
              "我的 blood type 是什么", "我的 salary 是多少", "我的 hobby 是什么"]
ANSWERED = [("体检前要注意什么", "体检"), ("which database did we pick", "LanceDB"),
            ("when is the standup", "standup"), ("Anna 是做什么工作的", "nurse"),
            ("我姐姐 Anna 住在哪个城市", "Berlin")]
# Each answer is in the other language, with no word in common: it passes `min_score` on
# its vector part alone (`ModelProfile.cross_script_shift`), at the default settings.
CROSS_LINGUAL = [("what is the name of my cat", "小白"), ("what is my favourite food", "火锅"),
                 ("我在学钢琴吗", "piano"), ("我妹妹住在柏林吗", "Berlin"),
                 ("牙医预约是什么时候", "dentist"), ("我们选了哪个数据库", "LanceDB")]


async def test_abstention_and_cross_lingual_recall(open_client: Any, e5: Any) -> None:
    """At the default settings, Chinese and English: a question whose answer is not stored
    returns nothing and counts no hit; a stored answer is returned first, also when the
    question is in the other language."""
    async with open_client(with_model=e5, embedding_model=E5_NAME) as client:
        await _abstention_and_cross_lingual_ranking(client)


async def _abstention_and_cross_lingual_ranking(client: Any) -> None:
    # One store for every question (each store call is a real build).
    await store_notes(client, NOTES)
    for question in UNANSWERED:  # nothing returned, nothing counted as a hit
        body = await recall(client, question)
        assert body["count"] == 0, (question, [m["text"] for m in body["memories"]])
        assert body["block"] == ""
    state = client.app.state.engram  # type: ignore[attr-defined]
    await state.hits.flush()
    assert all(m.hit_count == 0 for m in await state.repo.all_memories())
    for question, expected in ANSWERED:  # a stored answer passes the threshold
        body = await recall(client, question)
        assert body["count"] >= 1 and expected in body["memories"][0]["text"], question
    for question, expected in CROSS_LINGUAL:  # a question in one language, a memory in the other
        body = await recall(client, question)
        assert body["count"] >= 1 and expected in body["memories"][0]["text"], (
            question, [m["text"][:40] for m in body["memories"]])


async def store_pairs(client: Any) -> None:
    """Each memory of PAIRS in its own session, line by line as the client sent it."""
    for i, (_, memory) in enumerate(PAIRS):
        lines = [line.split(": ", 1) for line in memory.split("\n")]
        await store(client, [{"msg_id": f"p{i}-{k}", "role": role, "content": content}
                             for k, (role, content) in enumerate(lines)],
                    session_id=f"p{i}")


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


async def test_a_question_reads_the_same_on_both_models_scales_in_both_languages(
        open_client: Any, e5: Any, minilm: Any, tmp_path: Any) -> None:
    """The vector part of relevance (the cosine placed in the profile's band) means the same
    for each model and language: the memory that answers a question near the top of the
    band, unrelated ones near the bottom. e5's band was once set on two stored texts, which
    sit higher than a question against a memory: its English answers then got half of the
    vector part (chats a quarter) and fell under `min_score` unless their words matched."""
    for model, name in ((e5, E5_NAME), (minilm, MINILM_NAME)):
        async with open_client(with_model=model, embedding_model=name,
                               at=tmp_path / name) as client:
            await store_pairs(client)
            parts: dict[tuple[bool, bool], list[float]] = {}
            for i, (question, _) in enumerate(PAIRS):
                body = await recall(client, question, min_score=0, top_k=len(PAIRS),
                                    max_tokens=4000)
                assert body["count"] == len(PAIRS), (name, question)
                for m in body["memories"]:
                    related = m["session_id"] == f"p{i}"
                    parts.setdefault((has_han(question), related), []).append(
                        m["explain"]["vector"])
                if name == E5_NAME:  # MiniLM reads no Chinese: its zh answers are keywords
                    default = await recall(client, question)
                    assert default["memories"] and \
                        default["memories"][0]["session_id"] == f"p{i}", (question, default)
            for chinese in (False, True):
                if name == MINILM_NAME and chinese:
                    continue
                assert mean(parts[chinese, True]) >= 0.75, (name, chinese, parts[chinese, True])
                assert mean(parts[chinese, False]) <= 0.2, (name, chinese)


async def test_a_question_in_one_language_finds_the_memory_in_the_other(open_client: Any,
                                                                      e5: Any) -> None:
    """e5 puts any two Chinese texts closer than a Chinese question and the English memory
    that answers it: on one band for all pairs, Chinese memories about other things
    outranked it (4th to 9th here). An English question about a Chinese memory has no
    such offset to undo and no shared word to help: the answer is among the first two."""
    async with open_client(with_model=e5, embedding_model=E5_NAME) as client:
        await store_pairs(client)
        for question, index in ASKED_ACROSS:
            body = await recall(client, question, min_score=0)
            sessions = [m["session_id"] for m in body["memories"]]
            within = 1 if has_han(question) else 2
            assert f"p{index}" in sessions[:within], (
                question, [m["text"][:40] for m in body["memories"][:3]])


class TestProfiles:
    def test_the_thresholds_are_the_configured_models_profile(self, tmp_path: Any) -> None:
        e5 = make_settings(tmp_path, embedding_model=E5_NAME)
        minilm = make_settings(tmp_path, embedding_model=MINILM_NAME)
        assert e5.model_profile == profiles.E5
        assert minilm.model_profile == profiles.MINILM
        assert (e5.model_profile.cosine_floor, minilm.model_profile.cosine_floor) == (0.76, 0.05)

    def test_the_profile_setting_overrides_a_field_and_an_unknown_model_takes_a_profile(
            self, tmp_path: Any) -> None:
        stricter = make_settings(tmp_path, embedding_model=E5_NAME,
                                 embedding_profile={"min_score": 0.5})
        assert stricter.model_profile.min_score == 0.5
        assert stricter.model_profile.cosine_floor == profiles.E5.cosine_floor
        local = make_settings(tmp_path, embedding_model="/models/my-model",
                              embedding_profile={"cosine_floor": 0.2, "cosine_ceiling": 0.7})
        assert local.model_profile.cosine_band(chinese_pair=False) == (0.2, 0.7)
        assert local.model_profile.name == "/models/my-model"

    def test_a_bad_profile_is_refused_with_its_name(self, tmp_path: Any) -> None:
        with pytest.raises(ValueError, match="unknown field"):
            make_settings(tmp_path, embedding_profile={"cosine_flor": 0.2})
        with pytest.raises(ValueError, match="cosine_floor must be below"):
            make_settings(tmp_path, embedding_profile={"cosine_floor": 0.9,
                                                       "cosine_ceiling": 0.8})
