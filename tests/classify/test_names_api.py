"""POST /v1/classify names people, places and organisations, in Chinese and English.

Sentences written for these tests, beside the two of issue 36: a name must come back whole
(云栖大会, not 大会; Qwen2.5, not Qwen2), and everyday words that jieba's dictionary tags as
names (明白, 城市, 哥哥) must not.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests.procs import REPO_ROOT


async def _entities(client: Any, text: str) -> dict[str, list[str]]:
    response = await client.post("/v1/classify", json={"text": text})
    assert response.status_code == 200, response.text
    entities: dict[str, list[str]] = response.json()["entities"]
    return entities


def _all(entities: dict[str, list[str]]) -> set[str]:
    return {term for terms in entities.values() for term in terms}


async def test_issue_sentence_names_people_places_events_and_versions(client: Any) -> None:
    entities = await _entities(
        client, "张伟和李娜下周去杭州参加云栖大会，阿里巴巴会发布 Qwen2.5 的新版本。")
    assert {"张伟", "李娜", "杭州", "云栖大会", "阿里巴巴"} <= set(entities["proper_nouns"])
    assert "Qwen2.5" in _all(entities)
    assert "Qwen2" not in _all(entities) and "大会" not in entities["proper_nouns"]


async def test_issue_sentence_family_and_hospital(client: Any) -> None:
    entities = await _entities(client, "我老婆王芳说周六带儿子王小明去北京协和医院复查。")
    assert {"王芳", "王小明", "北京协和医院"} <= set(entities["proper_nouns"])


@pytest.mark.parametrize(("text", "names"), [
    ("刘德华明天在上海开演唱会。", {"刘德华", "上海"}),
    ("小李昨天跟陈静去了深圳面试。", {"小李", "陈静", "深圳"}),
    ("我同事赵磊下个月调去成都分公司。", {"赵磊", "成都"}),
    ("下周三和林晓梅在西湖边吃饭。", {"林晓梅", "西湖"}),
    ("我女儿在清华大学读研究生，导师是王建国教授。", {"清华大学", "王建国"}),
    ("帮我订一张去东京的机票，和孙悦一起。", {"东京", "孙悦"}),
    ("老张说公司今年会在新加坡设办公室。", {"老张", "新加坡"}),
    ("欧阳娜娜在华为工作，她哥哥住在成都。", {"欧阳娜娜", "成都"}),
    ("黄晓明和杨颖在西安参加了活动。", {"黄晓明", "杨颖", "西安"}),
    ("周杰伦的新专辑在台北发布了。", {"周杰伦", "台北"}),
])
async def test_chinese_names(client: Any, text: str, names: set[str]) -> None:
    assert names <= set((await _entities(client, text))["proper_nouns"])


@pytest.mark.parametrize("text", [
    "明白了，谢谢师傅，我觉得这个城市的东西很好吃。",
    "这周好忙，买了张票去看电影。",
    "我哥哥每周会去两次健身房，不订酒店。",
])
async def test_everyday_chinese_words_are_not_names(client: Any, text: str) -> None:
    assert (await _entities(client, text))["proper_nouns"] == []


@pytest.mark.parametrize(("text", "names"), [
    ("We deployed Qwen2.5 and Llama-3.1-8B on Kubernetes.", {"Qwen2.5", "Llama-3.1-8B"}),
    ("We upgraded from Python3.11 to Python3.12 yesterday.", {"Python3.11", "Python3.12"}),
    ("I bought an iPhone15 for Sarah.", {"iPhone15", "Sarah"}),
    ("我们用 DeepSeek-V3 替换了 GPT-4o。", {"DeepSeek-V3", "GPT-4o"}),
    ("Bob Smith works at Google in Mountain View.", {"Bob Smith", "Google", "Mountain View"}),
    ("My sister Maria moved to Berlin in May.", {"Maria", "Berlin"}),
    ("Remind me to call John about the invoice.", {"John"}),
    ("The NASA launch was delayed to June.", {"NASA"}),
    ("GPT-4o-mini is cheaper than Claude for this.", {"GPT-4o-mini", "Claude"}),
    ("Our team in Hong Kong switched to Gemini-1.5-Pro.", {"Hong Kong", "Gemini-1.5-Pro"}),
])
async def test_english_names_and_versions_whole(client: Any, text: str, names: set[str]
                                                ) -> None:
    entities = await _entities(client, text)
    assert names <= _all(entities)
    # The pieces of a versioned name are not names of their own.
    assert not {"GPT", "Qwen2", "Python3", "Llama"} & set(entities["proper_nouns"])


async def test_version_like_words_that_are_not_names(client: Any) -> None:
    entities = await _entities(client, "PM2.5 is bad today, so I stayed in and played mp3 files.")
    assert not {"PM2.5", "mp3"} & _all(entities)


def test_names_do_not_load_jiebas_full_part_of_speech_tables() -> None:
    """Names read jieba's tags for names only: `jieba.posseg`'s table of all 349k words
    (~40 MB) is not in a server that classifies Chinese until a compression pass needs it."""
    script = (
        "import sys\n"
        "from app.classify import analyze\n"
        "found = analyze('张伟和李娜下周去杭州参加云栖大会，老王说一张纸就够了。')\n"
        "names = set(found.entities.proper_nouns)\n"
        "assert {'张伟', '李娜', '杭州', '云栖大会', '老王'} <= names, names\n"
        "print('posseg' if 'jieba.posseg' in sys.modules else 'no posseg')\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "no posseg"
