"""Entity extraction: technologies, concepts, hashtags, quotes, proper nouns, bigrams."""

from __future__ import annotations

import tempfile
import threading

import jieba
import pytest

from app.classify import entities as entities_module
from app.classify.entities import Entities, extract_entities, subtopics, warm_up

REQUIRED_EXAMPLE = "我们决定使用 LanceDB 和 #向量检索 来构建记忆系统"


class TestRequiredExample:
    def test_chinese_sentence_with_technology_and_hashtag(self) -> None:
        e = extract_entities(REQUIRED_EXAMPLE)
        assert "LanceDB" in e.technologies
        assert "向量检索" in e.hashtags
        assert {"记忆", "系统", "构建"} <= set(e.concepts)


class TestTechnologies:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("we store vectors in lancedb", "LanceDB"),
            ("POSTGRES is our fallback", "PostgreSQL"),
            ("running ollama locally", "Ollama"),
            ("deploy it on k8s", "Kubernetes"),
            ("用fastapi写接口", "FastAPI"),
            ("we use scikit-learn for tf-idf", "scikit-learn"),
            ("hosted on Hugging Face", "Hugging Face"),
            ("发到微信群里", "WeChat"),
        ],
    )
    def test_known_names_in_canonical_case(self, text: str, expected: str) -> None:
        assert expected in extract_entities(text).technologies

    def test_inline_code_and_bold(self) -> None:
        e = extract_entities("Run `uv sync` first, then **Redis Streams** for the queue.")
        assert "uv sync" in e.technologies
        assert "Redis Streams" in e.technologies

    def test_code_fences_are_ignored(self) -> None:
        e = extract_entities("Look:\n```python\nimport redis\n```\nthat's all")
        assert "redis" not in e.concepts
        assert "import" not in e.concepts

    @pytest.mark.parametrize(
        "text",
        ["The service is written in Go.", "我们用 Go 写服务", "Go 1.22 adds range over ints."],
    )
    def test_go_with_programming_context(self, text: str) -> None:
        assert "Go" in extract_entities(text).technologies

    @pytest.mark.parametrize(
        "text", ["Go ahead and merge it.", "Let's go with Postgres.", "I go to the gym."]
    )
    def test_go_the_verb_is_not_a_technology(self, text: str) -> None:
        assert "Go" not in extract_entities(text).technologies

    @pytest.mark.parametrize(
        ("text", "name"),
        [
            ("How did the team react to the news?", "React"),
            ("There is rust on the bike.", "Rust"),
            ("Cut the slack, please.", "Slack"),
        ],
    )
    def test_ordinary_words_are_not_technologies(self, text: str, name: str) -> None:
        assert name not in extract_entities(text).technologies

    def test_case_sensitive_names_in_canonical_case(self) -> None:
        e = extract_entities("The frontend is React, the backend is in Rust.")
        assert {"React", "Rust"} <= set(e.technologies)

    def test_ordered_by_first_appearance_without_duplicates(self) -> None:
        e = extract_entities("Redis, then Python, then redis again and `Python`.")
        assert e.technologies == ("Redis", "Python")

    def test_name_inside_a_word_is_not_matched(self) -> None:
        assert "Git" not in extract_entities("a digital camera").technologies


class TestConcepts:
    def test_english_stop_words_and_length_limits(self) -> None:
        e = extract_entities("We are going to the supercalifragilistic memory cluster.")
        # "supercalifragilistic" is longer than 15 letters; the rest are stop words.
        assert e.concepts == ("memory", "cluster")

    def test_ranked_by_frequency(self) -> None:
        e = extract_entities("index tuning, index size, index speed and recall")
        assert e.concepts[0] == "index"

    def test_limited_to_max_concepts(self) -> None:
        text = (
            " ".join(f"word{c}" for c in "abcdefghijklmnop")
            + " "
            + " ".join(
                [
                    "alpha",
                    "bravo",
                    "charlie",
                    "delta",
                    "echo",
                    "foxtrot",
                    "golf",
                    "hotel",
                    "india",
                    "juliet",
                    "kilo",
                    "lima",
                ]
            )
        )
        assert len(extract_entities(text).concepts) == 10
        assert len(extract_entities(text, max_concepts=3).concepts) == 3

    def test_chinese_stop_words_and_numbers_excluded(self) -> None:
        e = extract_entities("我们今天讨论了三个方案，预算是2000元，百分之二十给数据库。")
        assert "数据库" in e.concepts
        assert "预算" in e.concepts
        assert not {"我们", "今天", "三个", "百分之二十", "2000"} & set(e.concepts)

    def test_compound_word_also_yields_its_parts(self) -> None:
        e = extract_entities("长期记忆系统")
        assert {"记忆", "系统"} <= set(e.concepts)

    def test_technologies_are_not_repeated_as_concepts(self) -> None:
        e = extract_entities("lancedb stores vectors")
        assert "lancedb" not in e.concepts
        assert "vectors" in e.concepts

    def test_urls_do_not_leak_into_concepts(self) -> None:
        e = extract_entities("see https://example.com/docs/index#section for details")
        assert not {"https", "example", "docs", "section"} & set(e.concepts)
        assert e.hashtags == ()


class TestHashtags:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("#向量检索 很重要", ("向量检索",)),
            ("tags: #memory, #long-term.", ("memory", "long-term")),
            ("全角＃中文标签，结束", ("中文标签",)),
            ("#2024plans and #v2", ("2024plans", "v2")),
            ("今天#长期记忆#上线了", ("长期记忆",)),
        ],
    )
    def test_hashtags(self, text: str, expected: tuple[str, ...]) -> None:
        assert extract_entities(text).hashtags == expected

    @pytest.mark.parametrize("text", ["fixed in #123", "C# is fine", "page#anchor", "# Heading"])
    def test_not_hashtags(self, text: str) -> None:
        assert extract_entities(text).hashtags == ()


class TestQuotes:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ('He said "ship it today" twice.', "ship it today"),
            ("她说“明天再说”就走了", "明天再说"),
            ("所谓「长期记忆」是什么", "长期记忆"),
            ("书名是『三体』", "三体"),
            ("the so-called ‘hot path’ matters", "hot path"),
            ("what does 'vector index' mean", "vector index"),
        ],
    )
    def test_quote_styles(self, text: str, expected: str) -> None:
        assert expected in extract_entities(text).quotes

    def test_apostrophes_are_not_quotes(self) -> None:
        e = extract_entities("I don't know, it's the users' data and the cats' toys.")
        assert e.quotes == ()


class TestProperNouns:
    def test_multiword_name(self) -> None:
        e = extract_entities("Our office in New York opens soon.")
        assert "New York" in e.proper_nouns

    def test_sentence_initial_common_word_is_dropped(self) -> None:
        e = extract_entities("Yesterday was long. The meeting ran late.")
        assert e.proper_nouns == ()

    def test_sentence_initial_name_kept_when_capitalised_elsewhere(self) -> None:
        e = extract_entities("Alice called. I told Alice about the plan.")
        assert "Alice" in e.proper_nouns

    def test_name_inside_chinese_text(self) -> None:
        assert "Alice" in extract_entities("明天和 Alice 一起吃饭").proper_nouns

    def test_connectors_and_acronyms(self) -> None:
        e = extract_entities("We bank with Bank of China and visited NASA. OK, FYI.")
        assert "Bank of China" in e.proper_nouns
        assert "NASA" in e.proper_nouns
        assert not {"OK", "FYI"} & set(e.proper_nouns)

    def test_names_are_not_split_into_concepts(self) -> None:
        e = extract_entities("The New York office is large.")
        assert not {"new", "york"} & set(e.concepts)


class TestBigrams:
    def test_repeated_pair(self) -> None:
        e = extract_entities("vector index tuning matters; the vector index is slow.")
        assert "vector index" in e.bigrams

    def test_chinese_pair_joined_without_space(self) -> None:
        assert "向量检索" in extract_entities("向量检索的召回率").bigrams

    def test_punctuation_breaks_adjacency(self) -> None:
        e = extract_entities("memory. index. memory. index.")
        assert "memory index" not in e.bigrams


class TestSubtopics:
    def test_technologies_and_hashtags_first(self) -> None:
        labels = subtopics(extract_entities(REQUIRED_EXAMPLE))
        assert labels[:2] == ["LanceDB", "向量检索"]

    def test_limit_and_no_contained_duplicates(self) -> None:
        e = Entities(
            technologies=("Redis",),
            hashtags=("记忆系统",),
            concepts=("记忆", "缓存", "redis", "队列", "延迟", "吞吐"),
        )
        assert subtopics(e, limit=4) == ["Redis", "记忆系统", "缓存", "队列"]

    def test_long_markup_is_not_a_label(self) -> None:
        e = Entities(technologies=("pip install -r requirements-dev.txt --upgrade",))
        assert subtopics(e) == []


class TestEntitiesHelpers:
    def test_to_dict_is_json_ready(self) -> None:
        d = extract_entities(REQUIRED_EXAMPLE).to_dict()
        assert set(d) == {
            "technologies",
            "concepts",
            "hashtags",
            "quotes",
            "proper_nouns",
            "bigrams",
        }
        assert all(isinstance(v, list) for v in d.values())

    def test_all_terms_deduplicates_case_insensitively(self) -> None:
        e = Entities(technologies=("Redis",), concepts=("redis", "cache"), bigrams=("cache",))
        assert e.all_terms() == ["Redis", "cache"]

    def test_empty_text(self) -> None:
        assert extract_entities("") == Entities()


class TestJiebaSetup:
    def test_warm_up_is_idempotent_and_thread_safe(self) -> None:
        errors: list[BaseException] = []

        def run() -> None:
            try:
                warm_up()
                extract_entities("多线程同时分词")
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert entities_module._jieba_ready

    def test_cache_goes_to_the_temp_dir(self) -> None:
        warm_up()
        assert jieba.dt.tmp_dir == tempfile.gettempdir()
