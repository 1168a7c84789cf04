"""Execution parts without storage: propositions, extractive summaries, triples, clusters,
feedback arithmetic and the optional abstractive summarizer."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import numpy as np

from app.compression import feedback as fb
from app.compression.clustering import cluster, consecutive_runs
from app.compression.scoring import Dimensions, Weights
from app.compression.summarize import AbstractiveSummarizer, extractive_summary
from app.compression.text import content_tokens, propositions, split_speaker
from app.compression.triples import compress_text, extract_triples

CHUNK_A = ("user: Caroline: Hi!\n"
           "assistant: Melanie: Hey! I signed up for a pottery class on 12 May, it costs $80.\n"
           "user: Caroline: Nice. I went to a support group yesterday.")
CHUNK_B = ("user: Caroline: Nice. I went to a support group yesterday.\n"
           "assistant: Melanie: That's great. Thanks!")


class TestText:
    def test_speakers_and_roles(self) -> None:
        assert split_speaker("user: Caroline: I went out.") == ("Caroline", "I went out.")
        assert split_speaker("assistant: 好的，我记下了。") == ("assistant", "好的，我记下了。")
        assert split_speaker("user: 小王：明天见") == ("小王", "明天见")
        assert split_speaker("user: 注意事项清单：带伞")[0] == "user"  # content, not a name

    def test_content_tokens_bilingual(self) -> None:
        tokens = content_tokens("我们决定用LanceDB做向量检索 and the tests passed")
        assert "lancedb" in tokens and "检索" in tokens and "tests" in tokens
        assert "the" not in tokens and "我们" not in tokens

    def test_propositions_drop_overlap_repeats(self) -> None:
        props = propositions([CHUNK_A, CHUNK_B])
        texts = [p.text for p in props]
        assert texts.count("I went to a support group yesterday.") == 1
        assert props[1].speaker == "Melanie"


class TestSummary:
    def test_keeps_the_most_informative_and_drops_small_talk(self) -> None:
        summary = extractive_summary([CHUNK_A, CHUNK_B], ratio=0.5)
        assert "pottery class on 12 May" in summary
        assert "Hi!" not in summary and "Thanks!" not in summary
        assert summary.startswith("Melanie: ")

    def test_length_follows_the_ratio(self) -> None:
        colours = ["red", "blue", "green", "amber", "violet", "grey", "white", "black",
                   "pink", "gold"]
        texts = [f"user: the {w} shipment goes by {v} to the {p} depot."
                 for w, v, p in zip(colours, [*colours[3:], *colours[:3]],
                                    [*colours[5:], *colours[:5]], strict=True)]
        short = extractive_summary(texts, ratio=0.2, min_chars=10)
        long = extractive_summary(texts, ratio=0.8, min_chars=10)
        assert len(short) < len(long) <= len("\n".join(texts))

    def test_facts_are_kept_first_whatever_the_ratio(self) -> None:
        texts = ["user: the weather was grey and the tea went cold again.",
                 "user: Ann moved the review to 14 May.", "user: 我们下周三下午3点在会议室评审。",
                 "user: Bob wants the Grafana boards fixed."]
        summary = extractive_summary(texts, ratio=0.05, min_chars=10, facts=["Grafana"])
        assert "14 May" in summary and "下周三下午3点" in summary and "Grafana" in summary

    def test_kept_terms_stay_findable(self) -> None:
        summary = extractive_summary([CHUNK_A], ratio=0.2, min_chars=10,
                                     keep_terms=["LanceDB", "pottery"])
        assert summary.splitlines()[-1] == "terms: LanceDB"

    def test_chinese(self) -> None:
        text = ("user: 今天天气不错。\nassistant: 我们决定下周三下午3点在3号会议室评审新版本。\n"
                "user: 好的。")
        assert "下周三下午3点" in extractive_summary([text], ratio=0.3)


class TestTriples:
    def test_english_subject_verb_object_with_the_speaker(self) -> None:
        triples = extract_triples(CHUNK_A)
        assert ("Melanie", "signed", "pottery class 12") in triples
        assert ("Caroline", "went", "support group") in triples

    def test_negation_and_contractions(self) -> None:
        (triple,) = extract_triples("user: Ann: I didn't finish the report.")
        assert triple == ("Ann", "not finish", "report")

    def test_chinese(self) -> None:
        triples = extract_triples("user: 我昨天去医院做了体检。")
        assert triples and triples[0][0] == "user" and triples[0][1] == "去"

    def test_compressed_form_is_shorter(self) -> None:
        for text in (CHUNK_A, CHUNK_B, "user: 今天早上天气有点阴，路上人不多，感觉挺安静的。"):
            assert 0 < len(compress_text(text)) < len(text)

    def test_entity_relations_are_kept(self) -> None:
        text = "user: We moved the vectors from PostgreSQL into LanceDB last week."
        kept = compress_text(text, entities=["PostgreSQL", "LanceDB"], keep_relations=True)
        assert "PostgreSQL" in kept and "LanceDB" in kept


class TestClusters:
    def test_topics_separate_and_neighbours_join(self) -> None:
        texts = ["user: the cat sat on the fence", "user: the cat chased a bird",
                 "user: PostgreSQL index tuning", "user: PostgreSQL vacuum settings"]
        vectors = np.array([[1, 0], [0.95, 0.05], [0, 1], [0.05, 0.95]], dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        assert cluster(texts, vectors, distance=0.5, max_size=8) == [[0, 1], [2, 3]]
        assert cluster(texts, vectors, distance=0.5, max_size=1) == [[0], [1], [2], [3]]
        assert cluster(texts[:1], vectors[:1], distance=0.5, max_size=8) == [[0]]

    def test_runs_without_clustering(self) -> None:
        assert consecutive_runs([3, 4, 5, 9, 10], max_size=8) == [[0, 1, 2], [3, 4]]
        assert consecutive_runs([1, 2, 3], max_size=2) == [[0, 1], [2]]


class TestFeedbackArithmetic:
    def test_state_round_trip(self) -> None:
        state = fb.FeedbackState(preset="default", weights={"novelty": 0.1, "entropy": 0.3,
                                                            "task": 0.5, "emotion": 0.1},
                                 hit_rate=0.5, checked_at=datetime(2025, 1, 1, tzinfo=UTC))
        assert fb.FeedbackState.from_json(state.to_json()) == state
        assert fb.FeedbackState.from_json(None) == fb.FeedbackState()

    def test_references_need_shared_terms(self) -> None:
        assert fb.is_referenced(["wiki", "Notion", "Friday"], "moved the WIKI to notion")
        assert not fb.is_referenced(["wiki", "Notion"], "the wiki is slow")
        assert fb.is_referenced(["体检"], "体检结果出来了")
        assert not fb.is_referenced([], "anything")

    def test_boost_is_capped(self) -> None:
        value = 0.0
        for _ in range(10):
            value = fb.add_boost(value)
        assert value == fb.MAX_BOOST

    def test_weights_move_towards_what_is_used_within_bounds(self) -> None:
        base = Weights(0.1, 0.3, 0.5, 0.1)
        used = [Dimensions(0.2, 0.3, 0.2, 1.0)] * 5
        ignored = [Dimensions(0.2, 0.3, 0.9, 0.0)] * 5
        current = base
        for _ in range(50):
            current = fb.adjust_weights(base, current, used, ignored)
        assert current.emotion > base.emotion and current.task < base.task
        for name, value in current.as_dict().items():
            assert abs(value - base.as_dict()[name]) <= fb.WEIGHT_BOUND + 1e-6
        assert abs(sum(current.as_dict().values()) - 1) < 1e-9

    def test_no_step_without_enough_evidence(self) -> None:
        base = Weights(0.1, 0.3, 0.5, 0.1)
        used = [Dimensions(0, 0, 0, 1.0)] * 3
        assert fb.adjust_weights(base, base, used, []) == base
        assert fb.adjust_weights(base, base, used[:2], used[:2]) == base

    def test_smoothed_rate(self) -> None:
        assert fb.smoothed_rate(None, 0.4) == 0.4
        assert fb.smoothed_rate(1.0, 0.0) == 1.0 - fb.HIT_RATE_SMOOTHING


class TestAbstractive:
    async def test_uses_the_endpoint_and_falls_back_on_failure(self) -> None:
        seen: list[dict[str, object]] = []

        def answer(request: httpx.Request) -> httpx.Response:
            import json

            seen.append(json.loads(request.content))
            return httpx.Response(200, json={"choices": [{"message": {
                "content": "Melanie takes a pottery class on 12 May."}}]})

        ok = AbstractiveSummarizer("http://llm.test/v1", model="tiny", api_key="k",
                                   transport=httpx.MockTransport(answer))
        assert await ok.summarize([CHUNK_A], max_chars=200) == (
            "Melanie takes a pottery class on 12 May.")
        assert seen[0]["model"] == "tiny"
        await ok.close()

        broken = AbstractiveSummarizer("http://llm.test/v1", model="tiny", transport=(
            httpx.MockTransport(lambda _: httpx.Response(503))))
        assert await broken.summarize([CHUNK_A], max_chars=200) is None
        await broken.close()
