"""What packing promises whatever the request's shape, through POST /v1/recall.

- Role labels do not decide what is trimmed: a two-person chat sent with every turn as
  `user` (imports, group chats, transcripts) keeps its answering turns like the same chat
  sent as user / assistant.
- A lower `min_score` only adds: what the default returns is still returned, whole.
- The best memory's lines are the same whatever `top_k` is.
- A question about one speaker of a dialogue gets that speaker's turns first, in either
  role shape, and the other turns back when the budget allows.

Chinese and English each; the texts are written for these tests.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.recall.tuning import CONTEXT_THRESHOLD_FACTOR
from tests.helpers import store
from tests.recall.test_focus_and_hops import returned_ids
from tests.recall.test_recall_api import recall

# (speaker, text): the answer (turn 1) shares no word with the question but the name.
EN_TRIP = [("Maya", "Where did you end up going for the anniversary trip?"),
           ("Leo", "We drove up to Lake Tahoe and rented a cabin by the water."),
           ("Maya", "That sounds lovely, I am a little jealous."),
           ("Leo", "It was great, the kids loved the boat ride most.")]
EN_DINNER = [("Maya", "Our anniversary dinner is booked for Friday at eight."),
             ("Leo", "Great, I will pick up flowers on the way home."),
             ("Maya", "Remember the babysitter needs the address."),
             ("Leo", "I will text her the address tonight.")]
ZH_TRIP = [("小雨", "你们周年旅行最后去了哪里？"),
           ("阿杰", "我们开车去了千岛湖，在湖边租了一间木屋。"),
           ("小雨", "听起来真不错，有点羡慕。"),
           ("阿杰", "是啊，孩子们最喜欢坐船。")]
ZH_DINNER = [("小雨", "周年纪念日的晚餐订在周五晚上八点。"),
             ("阿杰", "好的，我下班路上去买花。"),
             ("小雨", "记得把地址发给保姆。"),
             ("阿杰", "我今晚就把地址发给她。")]
CHATS = {
    "en": (EN_TRIP, EN_DINNER, "Where did Leo go for the anniversary trip?"),
    "zh": (ZH_TRIP, ZH_DINNER, "阿杰周年旅行去了哪里？"),
}


async def store_chat(client: Any, turns: list[tuple[str, str]], *, namespace: str,
                     session_id: str, all_user: bool) -> None:
    first = turns[0][0]
    await store(client, [
        {"msg_id": f"{session_id}-{i}",
         "role": "user" if all_user or speaker == first else "assistant",
         "content": f"{speaker}: {text}"}
        for i, (speaker, text) in enumerate(turns)], namespace=namespace,
        session_id=session_id)


class TestRoleShapes:
    @pytest.mark.parametrize("language", ["en", "zh"])
    async def test_a_chat_sent_all_as_user_keeps_its_answering_turn(
            self, client: Any, language: str) -> None:
        trip, dinner, query = CHATS[language]
        for all_user in (False, True):
            namespace = f"{language}-{'user' if all_user else 'speakers'}"
            await store_chat(client, trip, namespace=namespace, session_id="trip",
                             all_user=all_user)
            await store_chat(client, dinner, namespace=namespace, session_id="dinner",
                             all_user=all_user)
            whole = await recall(client, query, namespace=namespace)
            trip_memory = next(m for m in whole["memories"] if "trip-0" in m["msg_ids"])
            # Room for the trip chat, not for both: the weaker chat must not take the
            # answer's place.
            body = await recall(client, query, namespace=namespace, min_score=0,
                                max_tokens=trip_memory["tokens"] + 4)
            assert "trip-1" in returned_ids(body), (namespace, body["memories"])
            assert body["tokens"] <= trip_memory["tokens"] + 4


# Six notes a day, one memory per day; the noise is one note per session.
EN_DAY = ["Mia's dentist appointment is on Tuesday at four in the afternoon.",
          "Bought a new umbrella, the old one broke.", "The printer is out of toner.",
          "Watered the balcony plants.", "Called the bank about the card.",
          "Mia wants pancakes for breakfast tomorrow."]
EN_NOISE = ["The neighbours painted their fence green.", "Traffic was slow on the bridge.",
            "Finished the crossword puzzle in the paper.", "The gym was crowded tonight.",
            "Tried a new podcast about volcanoes.", "My laptop battery drains fast.",
            "Found an old postcard in a drawer.", "The bakery ran out of rye bread.",
            "Mia lost a glove at the park."]
ZH_DAY = ["米娅的牙医预约在周二下午四点。", "买了一把新雨伞，旧的坏了。", "打印机没有墨粉了。",
          "给阳台上的花浇了水。", "给银行打电话问了信用卡的事。", "米娅明天早上想吃煎饼。"]
ZH_NOISE = ["邻居把篱笆刷成了绿色。", "桥上堵车堵了半小时。", "把报纸上的填字游戏做完了。",
            "今晚健身房人很多。", "听了一档讲火山的播客。", "笔记本电脑的电池掉电很快。",
            "在抽屉里翻到一张旧明信片。", "面包店的黑麦面包卖完了。", "米娅在公园丢了一只手套。"]
NOTES = {
    "en": (EN_DAY, EN_NOISE, "When is the dentist appointment for Mia?"),
    "zh": (ZH_DAY, ZH_NOISE, "米娅的牙医预约是哪天？"),
}


async def store_day_and_noise(client: Any, day: list[str], noise: list[str], *,
                              namespace: str) -> None:
    await store(client, [{"msg_id": f"d{i}", "role": "user", "content": text}
                         for i, text in enumerate(day)], namespace=namespace,
                session_id="day")
    for i, text in enumerate(noise):
        await store(client, [{"msg_id": f"x{i}", "role": "user", "content": text}],
                    namespace=namespace, session_id=f"noise{i}")


# Two chats in which Leo / 阿杰 names a hobby; Maya's / 小雨's turns around it are longer
# and say nothing about him.
EN_HOBBIES = [
    [("Maya", "How was your weekend? I barely left the sofa, it rained the whole time and "
              "I watched three old films back to back."),
     ("Leo", "My new hobby is rock climbing, I went to the gym downtown on Saturday."),
     ("Maya", "Wow, that sounds exhausting. My cousin tried it once and said her fingers "
              "hurt for a week afterwards, so she went back to swimming."),
     ("Leo", "My arms are still sore from the climbing.")],
    [("Maya", "Any plans for the holidays this year? We are probably visiting my parents "
              "again, they want help painting the garden fence."),
     ("Leo", "I have picked up pottery as a hobby, a class on Sunday afternoons."),
     ("Maya", "Oh nice, my sister did that last spring and filled her whole kitchen with "
              "wonky bowls and cups that nobody dared to use."),
     ("Leo", "I hope my first mug turns out better than hers.")],
    [("Maya", "Did you see the new bakery on the corner? The queue went all the way down "
              "the street this morning, I gave up after ten minutes of waiting."),
     ("Leo", "I skipped it, chess club is my Thursday hobby and it ran late."),
     ("Maya", "Fair enough. I will try again on Saturday, apparently their cinnamon rolls "
              "sell out before nine, so I need to be there early."),
     ("Leo", "Bring me one if there are any left.")],
]
ZH_HOBBIES = [
    [("小雨", "周末过得怎么样？我几乎没出门，下了一整天的雨，我在家连着看了三部老电影。"),
     ("阿杰", "我的新爱好是攀岩，周六上午去了市中心的岩馆。"),
     ("小雨", "哇，听着就很累。我表姐试过一次，说手指疼了一个星期，后来又回去游泳了。"),
     ("阿杰", "我的胳膊现在还酸着呢。")],
    [("小雨", "今年放假有什么打算？我们大概又要去看我爸妈，他们想让我们帮忙刷花园的篱笆。"),
     ("阿杰", "我最近的另一个爱好是陶艺，报了周日下午的课。"),
     ("小雨", "不错啊，我妹妹去年春天也学过，做了一厨房歪歪扭扭的碗和杯子，谁都不敢用。"),
     ("阿杰", "希望我的第一个杯子能比她的好一点。")],
    [("小雨", "你看到街角新开的面包店了吗？今天早上排队排到了街尾，我等了十分钟就放弃了。"),
     ("阿杰", "我没去，周四晚上是我的下棋爱好时间，活动结束得很晚。"),
     ("小雨", "那也是。我周六再去试试，听说他们的肉桂卷九点前就卖完了，得早点去。"),
     ("阿杰", "要是还有剩的，帮我带一个。")],
]
HOBBIES = {"en": (EN_HOBBIES, "What does Leo do as a hobby?"),
           "zh": (ZH_HOBBIES, "阿杰有什么爱好？")}


# Speaker labels of several words or a family name, and a question that names only the
# given name, as people do: "Leo" for "Leo Martin", "阿杰" for "林阿杰", and a Latin name
# written without a space in a Chinese question ("Leo有什么爱好？").
FULL_NAMES = {
    "en": ({"Leo": "Leo Martin", "Maya": "Maya Ross"}, EN_HOBBIES,
           "What does Leo do as a hobby?"),
    "zh": ({"阿杰": "林阿杰", "小雨": "王小雨"}, ZH_HOBBIES, "阿杰有什么爱好？"),
    "zh-latin": ({"阿杰": "Leo Martin", "小雨": "Maya Ross"}, ZH_HOBBIES, "Leo有什么爱好？"),
}


def relabelled(chats: list[list[tuple[str, str]]], names: dict[str, str]
               ) -> list[list[tuple[str, str]]]:
    return [[(names[speaker], text) for speaker, text in chat] for chat in chats]


class TestNamedSpeaker:
    @pytest.mark.parametrize("language", ["en", "zh"])
    async def test_a_question_about_one_speaker_gets_his_turns_from_more_chats(
            self, client: Any, language: str) -> None:
        """"What does Leo do as a hobby?" is answered by Leo's own turns. With room for the
        best chat whole and a smaller one, the other two chats give Leo's turns only, so
        all three hobbies fit; the same in both role shapes, and the first memory is the
        same whatever `top_k`."""
        chats, query = HOBBIES[language]
        await self._check_named(client, chats, query, language)

    @pytest.mark.parametrize("shape", list(FULL_NAMES))
    async def test_the_given_name_names_a_speaker_labelled_with_the_full_name(
            self, client: Any, shape: str) -> None:
        """The same with speakers labelled "Leo Martin" / "林阿杰" and a question naming
        "Leo" / "阿杰" only."""
        names, chats, query = FULL_NAMES[shape]
        await self._check_named(client, relabelled(chats, names), query, shape)

    async def _check_named(self, client: Any, chats: list[list[tuple[str, str]]], query: str,
                           language: str) -> None:
        others = {f"c{n}-{i}" for n in range(len(chats)) for i in (0, 2)}
        for all_user in (False, True):
            namespace = f"{language}-{'user' if all_user else 'speakers'}"
            for n, chat in enumerate(chats):
                await store_chat(client, chat, namespace=namespace, session_id=f"c{n}",
                                 all_user=all_user)
            whole = await recall(client, query, namespace=namespace)
            assert others <= returned_ids(whole), whole["memories"]
            assert not any(m["trimmed"] for m in whole["memories"])  # room: turns given back
            first, *rest = whole["memories"]
            budget = first["tokens"] + min(m["tokens"] for m in rest) + 8
            body = await recall(client, query, namespace=namespace, max_tokens=budget)
            assert {f"c{n}-1" for n in range(len(chats))} <= returned_ids(body), body
            assert body["memories"][0]["msg_ids"] == first["msg_ids"]  # the best, whole
            for m in body["memories"][1:]:
                assert m["trimmed"] and not set(m["msg_ids"]) & others, (namespace, m)
            one = await recall(client, query, namespace=namespace, max_tokens=budget, top_k=1)
            assert one["memories"][0]["msg_ids"] == body["memories"][0]["msg_ids"]


class TestLowerThreshold:
    @pytest.mark.parametrize("language", ["en", "zh"])
    async def test_min_score_zero_returns_at_least_what_the_default_returns(
            self, client: Any, language: str) -> None:
        day, noise, query = NOTES[language]
        await store_day_and_noise(client, day, noise, namespace=language)
        default_full = await recall(client, query, namespace=language)
        day_tokens = sum(m["tokens"] for m in default_full["memories"])
        for budget in (day_tokens, day_tokens + 10, 1500):
            default = await recall(client, query, namespace=language, max_tokens=budget)
            everything = await recall(client, query, namespace=language, max_tokens=budget,
                                      min_score=0)
            assert returned_ids(default) <= returned_ids(everything), (
                budget, default["memories"], everything["memories"])
            assert everything["tokens"] <= budget


# Eleven notes of one day: two overlapping memories (n0–n5, n5–n10). The question matches
# n1 strongly and n5 (shared by both) by the name only.
EN_LONG_DAY = [*EN_DAY[:5], EN_DAY[5], "Renewed the library books online.",
               "The cat slept on the sofa all day.", "Booked a haircut for next week.",
               "Cleaned out the fridge.", "Sent the invoice to the client."]
ZH_LONG_DAY = [*ZH_DAY[:5], ZH_DAY[5], "在网上续借了图书馆的书。", "猫在沙发上睡了一整天。",
               "约了下周去理发。", "把冰箱清理了一遍。", "把发票发给了客户。"]


class TestTopK:
    @pytest.mark.parametrize("language", ["en", "zh"])
    async def test_the_first_memory_is_the_same_whatever_top_k(
            self, client: Any, language: str) -> None:
        notes = EN_LONG_DAY if language == "en" else ZH_LONG_DAY
        query = NOTES[language][2]
        await store(client, [{"msg_id": f"n{i}", "role": "user", "content": text}
                             for i, text in enumerate(notes)], namespace=language,
                    session_id="day")
        firsts = []
        for top_k in (1, 2, 10, 100):
            body = await recall(client, query, namespace=language, top_k=top_k,
                                min_score=0)
            assert body["memories"], body
            first = body["memories"][0]
            firsts.append((first["id"], first["msg_ids"], first["text"]))
            assert len(returned_ids(body)) == sum(len(m["msg_ids"])
                                                  for m in body["memories"])  # no repeats
        assert "n1" in firsts[0][1]
        assert all(f == firsts[0] for f in firsts), firsts


class TestContextAfterAnAnswer:
    @pytest.mark.parametrize("language", ["en", "zh"])
    async def test_weaker_matches_follow_an_answer_and_are_not_hits(
            self, open_client: Any, language: str) -> None:
        """min_score decides whether the question has an answer; once one memory passes it,
        weaker ones holding a word of the question, down to the context floor, fill the
        budget after it, uncounted."""
        day, noise, query = NOTES[language]
        async with open_client(hit_flush_seconds=3600) as client:
            state = client.app.state.engram
            await store_day_and_noise(client, day, noise, namespace=language)
            scored = await recall(client, query, namespace=language, min_score=0)
            relevance = {m["id"]: m["explain"]["relevance"] for m in scored["memories"]}
            best, second = sorted(relevance, key=relevance.__getitem__, reverse=True)[0], \
                max((m for m in scored["memories"][1:] if m["explain"]["keyword"] > 0),
                    key=lambda m: m["explain"]["relevance"])["id"]
            assert relevance[best] > relevance[second] > 0, relevance
            # A threshold the best memory passes and the second does not, although the
            # second is above the context floor (threshold x factor).
            factor = CONTEXT_THRESHOLD_FACTOR
            threshold = min(relevance[best] - 1e-3, relevance[second] / factor - 1e-3)
            assert relevance[second] < threshold
            await state.hits.flush()
            hits_before = {i: (await client.get(f"/v1/memories/{i}")).json()["hit_count"]
                           for i in (best, second)}
        # Restarted: the same question asked again the same day would be one hit (hits.py).
        async with open_client(hit_flush_seconds=3600) as client:
            state = client.app.state.engram
            body = await recall(client, query, namespace=language, min_score=threshold)
            ids = [m["id"] for m in body["memories"]]
            assert ids[0] == best and second in ids, body["memories"]
            passes = [m["explain"]["relevance"] >= threshold for m in body["memories"]]
            assert passes == sorted(passes, reverse=True), "context after every answer"
            # The floor is stated, and nothing below it rides along.
            assert body["context_min_score"] == pytest.approx(threshold * factor, abs=1e-4)
            assert all(m["explain"]["relevance"] >= body["context_min_score"]
                       for m in body["memories"]), body["memories"]
            await state.hits.flush()
            hits_after = {i: (await client.get(f"/v1/memories/{i}")).json()["hit_count"]
                          for i in (best, second)}
            assert hits_after == {best: hits_before[best] + 1, second: hits_before[second]}

            # Nothing passes: nothing is returned, however close the rest is (abstention).
            above = relevance[best] + 1e-3
            if above <= 1:
                assert (await recall(client, query, namespace=language,
                                     min_score=above))["memories"] == []

    @pytest.mark.parametrize("language", ["en", "zh"])
    async def test_a_weaker_match_sharing_no_word_does_not_ride_along(
            self, open_client: Any, language: str) -> None:
        """Near in meaning alone is what any of a user's notes is to a short question: above
        the context floor, a memory holding no word of the question is not returned after
        the answer, and `why_not` says so."""
        day, noise, query = NOTES[language]
        async with open_client() as client:
            await store_day_and_noise(client, day, noise, namespace=language)
            scored = await recall(client, query, namespace=language, min_score=0)
            best = scored["memories"][0]
            unshared = max((m for m in scored["memories"][1:] if m["explain"]["keyword"] == 0),
                           key=lambda m: m["explain"]["relevance"])
            strength = unshared["explain"]["relevance"]
            threshold = min(best["explain"]["relevance"] - 1e-3,
                            strength / CONTEXT_THRESHOLD_FACTOR - 1e-3)
            assert strength < threshold <= best["explain"]["relevance"]
            body = await recall(client, query, namespace=language, min_score=threshold)
            ids = [m["id"] for m in body["memories"]]
            assert ids[0] == best["id"] and unshared["id"] not in ids, body["memories"]
            assert all(m["explain"]["keyword"] > 0 for m in body["memories"]
                       if m["explain"]["relevance"] < threshold), body["memories"]
            response = await client.post("/v1/recall/why_not", json={
                "namespace": language, "query": query, "min_score": threshold,
                "memory_ids": [unshared["id"]]})
            item = response.json()["items"][0]
            assert item["verdict"] == "below_threshold", item
            assert "holds no word of the question" in item["reason"], item
