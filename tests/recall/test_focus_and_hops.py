"""Compound questions, second hops and packing by lines, through POST /v1/recall.

Chinese and English each: a user's notes are one speaker's statements, several per memory
(one session of six messages is one memory), mixed with unrelated chit-chat.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from app.embedding.names import DEFAULT_MODEL, MINILM_NAME
from app.embedding.profiles import profile_for
from tests.helpers import store
from tests.recall.test_recall_api import recall
from tests.recall.test_recall_api import store_notes as one_memory_each  # msg_ids n0, n1, …

ZH_NOTES = [
    "今天天气不错，下午出去散步了。",
    "我堂哥今年三十八岁了。",
    "最近在追一部电视剧，剧情挺好看的。",
    "晚饭做了西红柿炒鸡蛋，味道还可以。",
    "星河草地音乐节的时间是下周六晚上七点。",
    "昨天晚上睡得有点晚。",
    "星河草地音乐节的规模是八百人。",
    "中午吃了一碗牛肉面，有点辣。",
    "最近总是想喝奶茶。",
    "我养的猫今天又把花盆打翻了。",
    "下午开了一个很长的会。",
    "周末想去图书馆看看书。",
]
EN_NOTES = [
    "The weather was nice, I went for a walk after lunch.",
    "My cousin Daniel turned thirty-eight this spring.",
    "I'm watching a new series, the plot is pretty good so far.",
    "Made tomato and egg stir fry for dinner, it was fine.",
    "The Harbour Lights Gala starts at seven on Saturday evening.",
    "Slept a bit late last night.",
    "The Harbour Lights Gala will have five hundred guests.",
    "Had a bowl of beef noodles for lunch, quite spicy.",
    "I keep craving bubble tea lately.",
    "My cat knocked over the flower pot again today.",
    "Sat through a very long meeting this afternoon.",
    "Thinking of going to the library this weekend.",
]


async def store_notes(client: Any, notes: list[str], *, namespace: str) -> None:
    """Two sessions of six notes each: two memories of one speaker's statements."""
    for s in range(0, len(notes), 6):
        messages = [{"msg_id": f"n{s + i}", "role": "user", "content": note}
                    for i, note in enumerate(notes[s:s + 6])]
        await store(client, messages, namespace=namespace, session_id=f"day{s // 6}")


async def store_first_then_rest(client: Any, first: str, rest: list[str], *,
                                namespace: str) -> None:
    """A one-message day (msg_id e0), then a day of several messages (r0, r1, …)."""
    await store(client, [{"msg_id": "e0", "role": "user", "content": first}],
                namespace=namespace, session_id="day1")
    await store(client, [{"msg_id": f"r{i}", "role": "user", "content": text}
                         for i, text in enumerate(rest)], namespace=namespace, session_id="day2")


def returned_ids(body: dict[str, Any]) -> set[str]:
    return {i for m in body["memories"] for i in m["msg_ids"]}


class TestCompoundQuestions:
    async def test_both_questions_are_answered_within_a_small_budget(self, client: Any
                                                                      ) -> None:
        await store_notes(client, ZH_NOTES, namespace="zh")
        await store_notes(client, EN_NOTES, namespace="en")
        for namespace, query in (
            ("zh", "我堂哥今年几岁了？另外，星河草地音乐节的规模是什么？"),
            ("en", "How old is my cousin Daniel? Also, how many guests will the Harbour "
                   "Lights Gala have?"),
        ):
            body = await recall(client, query, namespace=namespace, max_tokens=60,
                                min_score=0)
            assert {"n1", "n6"} <= returned_ids(body), (namespace, body["memories"])
            assert body["tokens"] <= 60


# Another day's notes that share the question's common words (event, time), not the
# event's name or size.
ZH_OTHER = [
    "公司年会的时间还没定下来。", "上次的活动人太多了，排了很久的队。",
    "今天的会议时间改到了下午。", "我们小区的活动挺热闹的。", "周末的活动取消了，有点可惜。",
    "体育馆的开放时间是早上八点。",
]
EN_OTHER = [
    "The office party time has not been set yet.", "The bakery was so crowded we "
    "queued for an hour.", "Today's meeting time moved to the afternoon.",
    "Our neighbourhood picnic was fun.", "The weekend hike was "
    "cancelled, a pity.", "The gym opens at eight in the morning.",
]


class TestSecondHop:
    async def test_the_fact_named_by_another_fact_is_found(self, client: Any) -> None:
        """The question names the event only by its size; its time is in another memory
        (another day) that shares nothing with the question but the event's name."""
        await store_notes(client, ZH_NOTES + ZH_OTHER, namespace="zh")
        await store_notes(client, EN_NOTES + EN_OTHER, namespace="en")
        for namespace, query in (
            ("zh", "那个规模是八百人的活动，时间是哪天？"),
            ("en", "The event with five hundred guests: what time does it start?"),
        ):
            body = await recall(client, query, namespace=namespace, max_tokens=50)
            assert {"n6", "n4"} <= returned_ids(body), (namespace, body["memories"])


class TestPackingByLines:
    async def test_statements_give_their_matching_line_first(self, client: Any) -> None:
        await store_notes(client, ZH_NOTES, namespace="zh")
        body = await recall(client, "我堂哥今年几岁了", namespace="zh", max_tokens=30)
        first = body["memories"][0]
        assert first["msg_ids"] == ["n1"] and first["trimmed"], first
        assert body["tokens"] <= 30

    async def test_statements_get_their_other_lines_back_when_the_budget_allows(
            self, client: Any) -> None:
        await store_notes(client, EN_NOTES, namespace="en")
        body = await recall(client, "How old is my cousin Daniel?", namespace="en",
                            max_tokens=1500, min_score=0)
        assert {f"n{i}" for i in range(12)} <= returned_ids(body)

    async def test_a_dialogue_that_does_not_fit_gives_its_matching_turns(
            self, client: Any) -> None:
        """Whole dialogue chunks stay whole while they fit; the one that does not fit is
        not skipped but cut to the turns that match."""
        turns = [
            ("user", "Did you see the game last night?"),
            ("assistant", "I did not, how was it?"),
            ("user", "Great match, it went to overtime."),
            ("assistant", "Nice. By the way, your passport renewal appointment is on "
                          "the 14th of March at the consulate."),
            ("user", "Thanks, I'll bring the old passport and two photos."),
            ("assistant", "Good idea, they also ask for the application form."),
        ]
        await store(client, [{"msg_id": f"t{i}", "role": role, "content": text}
                             for i, (role, text) in enumerate(turns)], namespace="chat")
        body = await recall(client, "When is my passport renewal appointment?",
                            namespace="chat", max_tokens=45)
        assert body["memories"], body
        assert "t3" in returned_ids(body)
        assert body["tokens"] <= 45
        whole = await recall(client, "When is my passport renewal appointment?",
                             namespace="chat", max_tokens=1500)
        assert not whole["memories"][0]["trimmed"]


class TestNoisyWrapper:
    async def test_the_question_after_the_chit_chat_is_searched(self, client: Any) -> None:
        await store_notes(client, ZH_NOTES, namespace="zh")
        query = ("今天阳光不错，下午想去公园转转。昨天看的电视剧真是让人意犹未尽。"
                 "哎，我真正想弄清楚的是，我堂哥今年几岁了？")
        body = await recall(client, query, namespace="zh", max_tokens=60)
        assert body["memories"][0]["msg_ids"] == ["n1"], body["memories"]


class TestEquivalentAttributes:
    async def test_an_attribute_asked_in_other_words_finds_its_fact(self, client: Any
                                                                    ) -> None:
        """Three facts about the same person; only the attribute tells them apart, and the
        question names it differently from the note (年龄 / 岁, birthday / born)."""
        zh = ["我舅妈家住在杭州西湖边。", "今天下午去超市买了水果。",
              "我舅妈的邮箱是aunt.li@example.com。", "晚上看了一会儿书。",
              "我舅妈今年五十三岁了。", "明天可能会下雨。"]
        en = ["My aunt Lisa lives in Leeds near the river.", "Bought some fruit this "
              "afternoon.", "My aunt Lisa's email is lisa@example.com.", "Read a book in "
              "the evening.", "My aunt Lisa was born on the 3rd of May.", "It may rain "
              "tomorrow."]
        for namespace, notes in (("zh", zh), ("en", en)):
            await one_memory_each(client, notes, namespace=namespace, prefix="n")
        for namespace, query in (("zh", "我舅妈的年龄是多少？"),
                                 ("en", "When is aunt Lisa's birthday?")):
            body = await recall(client, query, namespace=namespace, max_tokens=20)
            assert body["memories"][0]["msg_ids"] == ["n4"], (namespace, body["memories"])

    async def test_a_relative_asked_by_another_kinship_word_is_found(self, client: Any
                                                                      ) -> None:
        """父亲 asked, 爸爸 stated; father asked, dad stated."""
        for namespace, notes, query in (
            ("zh", ["今天下午去超市买了水果。", "我爸爸在一家建筑公司当工程师。",
                    "晚上看了一会儿书。", "我朋友下个月结婚。"], "我父亲是做什么工作的？"),
            ("en", ["Bought some fruit this afternoon.", "My dad is an engineer at a "
                    "construction firm.", "Read a book in the evening.", "My friend is "
                    "getting married next month."], "What does my father do for a living?"),
        ):
            await one_memory_each(client, notes, namespace=namespace, prefix="n")
            body = await recall(client, query, namespace=namespace, max_tokens=20)
            assert body["memories"][0]["msg_ids"] == ["n1"], (namespace, body["memories"])


class TestHopFromOneMessage:
    async def test_a_single_message_memory_leads_to_the_asked_attribute(
            self, client: Any) -> None:
        """The person is named only by an email address, in a session of one message; the
        asked attribute is in another session among chit-chat."""
        for namespace, first, rest, query in (
            ("zh", "我下属的邮箱是zhao.yu@example.com。",
             ["今天天气不错，出去走了走。", "我下属的学历是硕士。", "晚饭吃了饺子。",
              "最近在看一本小说。"],
             "那个邮箱是zhao.yu@example.com的人，教育背景如何？"),
            ("en", "My colleague's email is zhao.yu@example.com.",
             ["Nice weather today, went for a walk.", "My colleague Zhao studied "
              "economics at Fudan.", "Had dumplings for dinner.", "Reading a novel lately."],
             "The person whose email is zhao.yu@example.com: what did they study?"),
        ):
            await store_first_then_rest(client, first, rest, namespace=namespace)
            body = await recall(client, query, namespace=namespace, max_tokens=60)
            assert {"e0", "r1"} <= returned_ids(body), (namespace, body["memories"])


class TestReturnedLines:
    async def test_a_memory_whose_match_was_returned_adds_no_filler(self, client: Any
                                                                    ) -> None:
        """Neighbouring chunks share a message; once the better one returned the matching
        line, the other has only unrelated statements left and is not returned."""
        for namespace, notes, query in (("zh", ZH_NOTES[:11], "我堂哥今年几岁了"),
                                        ("en", EN_NOTES[:11], "How old is my cousin Daniel?")):
            notes = [*notes[:5], notes[1], *notes[6:]]  # the fact is message 5
            notes[1] = ZH_OTHER[0] if namespace == "zh" else EN_OTHER[0]
            await store(client, [{"msg_id": f"n{i}", "role": "user", "content": note}
                                 for i, note in enumerate(notes)], namespace=namespace)
            body = await recall(client, query, namespace=namespace, max_tokens=1500,
                                min_score=0)
            holding = [m for m in body["memories"] if "n5" in m["msg_ids"]]
            assert len(holding) == 1 and body["count"] == 1, (namespace, body["memories"])


class TestUnreadableQuery:
    async def test_the_ranking_trusts_the_cosine_as_far_as_the_model_reads_the_query(
            self, open_client: Any, minilm: Any) -> None:
        """MiniLM (stores built before e5) reads most Chinese characters as [UNK]: a Chinese
        query is ranked mostly by its keywords; an English one by the configured mix."""
        async with open_client(with_model=minilm, embedding_model=MINILM_NAME) as client:
            notes = {"zh": ["下周二上午九点半去医院体检。",
                            "今天心情不太好，工作上遇到了很多麻烦事，不知道怎么跟领导沟通，"
                            "晚上回家也没什么胃口，只想早点睡觉。"],
                     "en": ["My checkup at the hospital is next Tuesday at half past nine.",
                            "Rough day at work, lots of trouble and no idea how to talk to my "
                            "manager about it."]}
            for namespace, texts in notes.items():
                await one_memory_each(client, texts, namespace=namespace, prefix="n")
            zh = await recall(client, "我的体检安排是哪天", namespace="zh", min_score=0)
            en = await recall(client, "When is my checkup?", namespace="en", min_score=0)
            assert zh["memories"][0]["msg_ids"] == ["n0"], zh["memories"]
            assert en["memories"][0]["msg_ids"] == ["n0"], en["memories"]
            for memory in zh["memories"] + en["memories"]:
                parts = memory["explain"]
                assert memory["score"] == pytest.approx(
                    parts["ranking"] * parts["decay"] * parts["boost"], abs=1e-3)
            for memory in en["memories"]:
                assert memory["explain"]["ranking"] == pytest.approx(
                    memory["explain"]["relevance"], abs=1e-4)
            chit_chat = zh["memories"][-1]["explain"]
            assert chit_chat["ranking"] < chit_chat["relevance"], zh["memories"]


class TestNamesOutsideTheDictionary:
    async def test_people_named_in_the_question_are_found(self, client: Any) -> None:
        """The segmenter's dictionary does not know most personal names: without its guess
        at them, "宋嘉树和林婉清谁更年长？" keeps no term but 年长 and finds nothing."""
        for namespace, notes, query in (
            ("zh", ["宋嘉树是我的表哥，今年三十一岁。", "今天下午去超市买了水果。",
                    "林婉清是我的同事，今年四十六岁。", "晚上看了一会儿书。", "明天可能会下雨。"],
             "宋嘉树和林婉清谁更年长？"),
            ("en", ["Teodor is my cousin, he is thirty-one.", "Bought some fruit this "
                    "afternoon.", "Marisol is my colleague, she is forty-six.",
                    "Read a book in the evening.", "It may rain tomorrow."],
             "Who is older, Teodor or Marisol?"),
        ):
            await one_memory_each(client, notes, namespace=namespace, prefix="n")
            body = await recall(client, query, namespace=namespace, max_tokens=60)
            assert {"n0", "n2"} <= returned_ids(body), (namespace, body["memories"])


class TestKindsAndTheirMembers:
    @pytest.mark.parametrize("cases", [
        pytest.param((
            ("zh", ["今天下午去超市买了水果。", "我家厨房新装了一台博世洗碗机。",
                    "我家楼下新开了一家面包店。", "我用的笔记本是同事送的。"],
             "我家里用的是什么家电？"),
            ("en", ["Bought some fruit this afternoon.", "I switched to a Pixel last month.",
                    "Read a book in the evening.", "It may rain tomorrow."],
             "Which phone do I have?"),
        ), id="appliance-phone"),
        pytest.param((
            ("en", ["Bought some fruit this afternoon.", "Took my daughter to the aquarium "
                    "on Saturday.", "My colleague is learning the guitar.",
                    "It may rain tomorrow."], "What did I do with my family lately?"),
        ), id="family-en"),
        pytest.param((
            ("zh", ["今天下午去超市买了水果。", "周末带女儿去了海洋馆。", "我同事最近在学吉他。",
                    "明天可能会下雨。"], "我和家人一起做了什么？"),
        ), id="family-zh", marks=pytest.mark.xfail(strict=True, reason=(
            "relevance 0.29 < 0.35: 女儿 holds 家人 for the keyword share, but the full-text "
            "search does not look for a kind's members (adding them cost MemDaily 0.7 points "
            "at 500 tokens); it passed only through the hop confirming its own line"))),
        pytest.param((
            ("zh", ["今天下午去超市买了水果。", "我表姐是一名护士。", "我表姐住在杭州。",
                    "明天可能会下雨。"], "我表姐的职业是什么？"),
            ("en", ["Bought some fruit this afternoon.", "My cousin Mia is a nurse.",
                    "My cousin Mia lives in Leeds.", "It may rain tomorrow."],
             "What is cousin Mia's occupation?"),
        ), id="occupation"),
        pytest.param((
            ("zh", ["今天下午去超市买了水果。", "三月开始上大提琴课了。",
                    "我家楼下新开了一家面包店。", "明天可能会下雨。"], "我学的是什么乐器？"),
            ("en", ["Bought some fruit this afternoon.", "I started cello lessons in March.",
                    "A new bakery opened downstairs.", "It may rain tomorrow."],
             "Which instrument do I play?"),
        ), id="instrument"),
    ])
    async def test_a_thing_asked_by_its_kind_is_found_by_its_name(
            self, client: Any, cases: tuple[tuple[str, list[str], str], ...]) -> None:
        """The user names the thing ("博世洗碗机", "a Pixel", "女儿", "护士", "大提琴") and
        asks by its kind (家电, phone, family, 职业, 乐器); nothing else in the question
        matches the note."""
        for namespace, notes, query in cases:
            await one_memory_each(client, notes, namespace=namespace, prefix="n")
            body = await recall(client, query, namespace=namespace, max_tokens=60)
            assert body["memories"] and body["memories"][0]["msg_ids"] == ["n1"], \
                (namespace, body["memories"])


class TestHopWithoutScaffolding:
    async def test_the_hop_finds_a_memory_that_shares_only_the_name(self, client: Any
                                                                    ) -> None:
        """The first search finds the note naming the mall; the opinion about it shares
        only the mall's name, and the question's other words ("下列哪一项描述最贴切")
        are in no memory at all: they must not keep the hop's find under `min_score`."""
        for namespace, first, rest, query in (
            ("zh", "我常去的商场是星光百货。",
             ["今天天气不错，出去走了走。", "星光百货东西挺全的，就是周末人太多。",
              "晚饭吃了饺子。"],
             "对于我常去的商场，下列哪一项描述最贴切？"),
            ("en", "The mall I go to most is Riverside Plaza.",
             ["Nice weather today, went for a walk.", "Riverside Plaza has everything, "
              "but it is packed on weekends.", "Had dumplings for dinner."],
             "Which of the following best describes the mall I go to most?"),
        ):
            await store_first_then_rest(client, first, rest, namespace=namespace)
            body = await recall(client, query, namespace=namespace, max_tokens=60)
            assert {"e0", "r1"} <= returned_ids(body), (namespace, body["memories"])


class TestCountingQuestions:
    async def test_every_memory_with_the_attribute_is_returned(self, client: Any) -> None:
        """"有几个人在福建厦门工作？" is answered by reading every workplace stated, also those
        that do not match the asked city: weaker matches are accepted (min_score times the
        model's `count_threshold_factor`), also under a min_score above the default."""
        factor = profile_for(DEFAULT_MODEL).count_threshold_factor
        for namespace, facts, chat, query in (
            ("zh", ["宋嘉树在福建厦门工作。", "林婉清在湖北武汉工作。", "周慕白在云南昆明工作。"],
             ["最近工作有点忙，晚上总加班。", "今天下午去超市买了水果。",
              "工作了一天，晚上看了一会儿书。", "这周工作不太顺利，心情一般。"],
             "有几个人在福建厦门工作？"),
            ("en", ["Teodor works in Lisbon.", "Marisol works in Porto.", "Anika works in "
                    "Madrid."],
             ["Work has been busy lately, lots of overtime.", "Bought some fruit this "
              "afternoon.", "After work I read a book in the evening.", "Work did not go "
              "well this week."],
             "How many people work in Lisbon?"),
        ):
            await one_memory_each(client, [*facts, *chat], namespace=namespace, prefix="n")
            body = await recall(client, query, namespace=namespace, max_tokens=300,
                                min_score=0.5)
            assert {"n0", "n1", "n2"} <= returned_ids(body), (namespace, body["memories"])
            assert body["min_score"] == pytest.approx(0.5 * factor)

    async def test_a_counting_question_finds_every_value(self, client: Any) -> None:
        """"有几个人在40岁以下？": every age stated is needed, none says 40 and no word
        names the age; the ages come first, before chit-chat the model scores as close."""
        notes = ["宋嘉树是我的表哥，今年三十一岁。", "今天下午去超市买了水果。",
                 "林婉清是我的同事，今年四十六岁。", "晚上看了一会儿书。",
                 "周慕白是我的舅舅，今年五十二岁。", "明天可能会下雨。",
                 "我表哥最近工作很忙。", "同事送了我一本书。"]
        await one_memory_each(client, notes, namespace="zh", prefix="n")
        body = await recall(client, "有几个人在40岁以下？", namespace="zh", max_tokens=300)
        first = {i for m in body["memories"][:3] for i in m["msg_ids"]}
        assert first == {"n0", "n2", "n4"}, body["memories"]


# A day that identifies the person (n1), a day with their age among notes whose one line
# shares a word of the question with no bearing on it (n6: "护士站", "nurse reunion"), and
# two days of unrelated notes.
HOP_DAYS = {
    "zh": [
        "今天天气不错，下午出去散步了。", "我婶婶在深圳当护士。",
        "晚饭做了西红柿炒鸡蛋，味道还可以。", "最近在追一部电视剧，剧情挺好看的。",
        "中午吃了一碗牛肉面，有点辣。", "最近总是想喝奶茶。",
        "这周护士站的同学聚会又改期了。", "我养的猫今天又把花盆打翻了。",
        "我婶婶今年五十九岁了。", "下午开了一个很长的会。",
        "周末想去图书馆看看书。", "昨天晚上睡得有点晚。",
        *ZH_OTHER,
        "今天下午去超市买了水果。", "晚上看了一会儿书。", "明天可能会下雨。",
        "我朋友下个月结婚。", "我家楼下新开了一家面包店。", "同事送了我一本书。",
    ],
    "en": [
        "The weather was nice, I went for a walk after lunch.",
        "My aunt Mary is a nurse in Shenzhen.",
        "Made tomato and egg stir fry for dinner, it was fine.",
        "I'm watching a new series, the plot is pretty good so far.",
        "Had a bowl of beef noodles for lunch, quite spicy.", "I keep craving bubble tea lately.",
        "The nurse reunion got moved again this week.",
        "My cat knocked over the flower pot again today.", "Mary turned fifty-nine in March.",
        "Sat through a very long meeting this afternoon.",
        "Thinking of going to the library this weekend.", "Slept a bit late last night.",
        *EN_OTHER,
        "Bought some fruit this afternoon.", "Read a book in the evening.",
        "It may rain tomorrow.", "My friend is getting married next month.",
        "A new bakery opened downstairs.", "A colleague gave me a book.",
    ],
}
HOP_QUERIES = {"zh": "那个在深圳当护士的人，年龄是多少？",
               "en": "How old is the nurse in Shenzhen?"}


class TestWhatTheHopIdentified:
    @pytest.mark.parametrize("language", ["zh", "en"])
    async def test_the_identified_persons_other_facts_are_kept(self, open_client: Any,
                                                                 language: str) -> None:
        """"How old is the nurse in Shenzhen?": the first search finds the note that
        identifies the person ("my aunt Mary is a nurse in Shenzhen"); what else is stored
        about Mary answers, also a line that shares no word with the question ("Mary turned
        fifty-nine"), in a day whose one line sharing a question word is about something
        else. The word lists are off: no list says that 年龄 is asked and 岁 stated."""
        async with open_client(recall_equivalents=False) as client:
            await store_notes(client, HOP_DAYS[language], namespace=language)
            body = await recall(client, HOP_QUERIES[language], namespace=language,
                                max_tokens=60)
            assert {"n1", "n8"} <= returned_ids(body), body["memories"]
            assert body["tokens"] <= 60


# The answer's day first, then a day whose lines each hold one of the question's words (and
# is newer, so a tie would go to it).
SPLIT_DAYS = {
    "zh": ["最近在学一门新的编程语言，进展不快。", "谢谢你的建议。",
           "城市设计论坛的持续时间是三天。", "晚饭吃了饺子。",
           "下午开了一个很长的会。", "想喝奶茶。",
           "城市设计论坛的主要内容是探讨设计理论和创新案例。",
           "今天学了一道新菜，清蒸鲈鱼。", "高尔夫友谊赛的持续时间是一天。",
           "读书分享会的持续时间是两个小时。", "周末想去爬山。",
           "我养的猫今天又把花盆打翻了。"],
    "en": ["I'm learning a new programming language, slow going.", "Thanks for the advice.",
           "The Urban Design Forum lasts three days.", "Had dumplings for dinner.",
           "Sat through a very long meeting this afternoon.", "I keep craving bubble tea.",
           "The Urban Design Forum is about new design theory and case studies.",
           "Learned to steam sea bass today.", "The golf friendly match lasts one day.",
           "The book club meeting lasts two hours, a long evening.",
           "Want to go hiking this weekend.", "My cat knocked over the flower pot again today."],
}
SPLIT_QUERIES = {"zh": "城市设计论坛的持续时间是什么？",
                 "en": "How long does the Urban Design Forum last?"}


class TestOneLineAnswers:
    @pytest.mark.parametrize("language", ["zh", "en"])
    async def test_the_day_whose_one_line_answers_comes_first(self, client: Any,
                                                                language: str) -> None:
        """Both days hold every word of the question, and e5 reads both as close; but in
        one a single line holds them all (the answer), in the other each line holds one
        ("the forum is about…", "the golf match lasts one day"). Notes are facts a line
        each: the day with the answering line is the first memory."""
        await store_notes(client, SPLIT_DAYS[language], namespace=language)
        body = await recall(client, SPLIT_QUERIES[language], namespace=language)
        assert "n2" in body["memories"][0]["msg_ids"], body["memories"]


class TestAHopDoesNotConfirmItsOwnLine:
    """A user's one-line facts; questions about things never stored. The second hop is
    searched with the best line the first search found ("我老公叫陈磊…" for "我弟弟叫什么
    名字？"): that line's own memory then matches the hop as itself, at relevance 1.0, and
    came back as the answer to every question sharing a word with it."""

    NOTES: ClassVar = {
        "zh": ["我老公叫陈磊，是中学物理老师，平时很忙。", "我们家的猫叫团子，是一只橘猫，三岁了。",
               "我女儿今年六岁，最喜欢画画，每周六上午去少年宫上美术课。",
               "我最喜欢的作家是余华，最近在重读《活着》。", "我住在静安区，房租每个月 7,200 块。"],
        "en": ["My partner Sam works as a nurse at the Erasmus hospital and is busy most "
               "weekends.", "Our cat is called Biscuit, a three-year-old tabby.",
               "My daughter Lily is six and loves drawing; she has art class on Saturday "
               "mornings.", "My favourite book is The Left Hand of Darkness, I am rereading "
               "it.", "I live in Kralingen and the rent is 1,450 euros a month."],
    }
    UNSTORED: ClassVar = {
        "zh": ["我的狗叫什么名字？", "我弟弟叫什么名字？", "我平时用什么牌子的护肤品？",
               "我女儿的钢琴老师是谁？"],
        "en": ["Which skincare brand do I use?"]}
    # (question, the note answering it): the same facts are still found.
    STORED: ClassVar = {
        "zh": [("我们家的猫叫什么名字？", "n1"), ("我老公是做什么的？", "n0")],
        "en": [("What is our cat called?", "n1"), ("What does Sam do?", "n0")]}

    @pytest.mark.parametrize("language", ["zh", "en"])
    async def test_a_question_about_something_never_stored_returns_nothing(
            self, client: Any, language: str) -> None:
        await one_memory_each(client, self.NOTES[language], namespace=language, prefix="n")
        for query in self.UNSTORED[language]:
            body = await recall(client, query, namespace=language)
            assert body["memories"] == [], (query, [
                (m["text"], m["explain"]["relevance"]) for m in body["memories"]])
        for query, answer in self.STORED[language]:
            body = await recall(client, query, namespace=language)
            assert body["memories"] and body["memories"][0]["msg_ids"] == [answer], \
                (query, body["memories"])
