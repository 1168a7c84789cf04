"""Per-model calibration: every absolute threshold on a cosine belongs to the model.

Models spread their cosines differently. For all-MiniLM-L6-v2 unrelated text scores about
0.05 and a close paraphrase 0.55 or more; multilingual-e5-small puts everything in a narrow
band (unrelated about 0.70-0.80, related 0.80-0.95, a Chinese question scoring higher against
any Chinese text than an English one against English). A threshold tuned for one model means
nothing for the other, so the recall settings that depend on the cosine's scale take their
values from the configured model's profile (`Settings.model_profile`), and only from there;
a deployment may override any field with `ENGRAM_EMBEDDING_PROFILE` (below), and a recall
may pass its own `min_score`.

The values were calibrated on sentences written for the purpose, never on evaluation data:
tests/embedding/calibration_pairs.py (questions and the notes or chat stretches that answer
them, Chinese and English) and tests/embedding/test_calibration.py. The band is measured
the way recall uses it, a question against stored text: the floor near the median cosine of
a question and an unrelated memory, the ceiling near the median of a question and its
answer. MiniLM's 0.05 / 0.55 sit there (English medians 0.10 / 0.49); for e5 they are
0.76 / 0.86 in English and 0.84 / 0.91 for a Chinese question against Chinese text (a
Chinese question against English text reads like English: unrelated median 0.75); e5's
English ceiling is above its related median (0.84) so that a question whose answer is not
stored stays under `min_score` ("what's my blood type" scores 0.824 against a note about a
nurse, as high as a chat stretch against the question it answers). e5's
first band (0.78 / 0.93) had been read off pairs of stored texts, which sit higher: a
LoCoMo answer at cosine 0.84 got a vector part of 0.4 and fell under `min_score` unless its
words matched (docs/decisions/0003-relevance-scale-and-cosine-bands.md).

An unknown model (a local sentence-transformers directory) gets `GENERIC`, MiniLM's values,
with a warning; give it its own with `ENGRAM_EMBEDDING_PROFILE`, a JSON object of any of
`ModelProfile`'s fields, e.g. `{"cosine_floor": 0.1, "cosine_ceiling": 0.6}`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import structlog

from app.embedding.names import E5_NAME, MINILM_NAME, canonical_name

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ModelProfile:
    """How one model's cosines read.

    Attributes:
        cosine_floor: a cosine at or below this is unrelated text (vector part 0).
        cosine_ceiling: a cosine at or above this is a close paraphrase (vector part 1).
            Both are measured as recall uses them: a question (e5's "query: " side) against
            stored text ("passage: "), not two stored texts, which sit higher for e5.
        zh_floor_shift: how much higher the floor is for a Chinese question against
            Chinese text: e5 puts any two Chinese texts closer than two English ones
            (unrelated about 0.84 against 0.76), while a Chinese question against English
            text reads like English. One band for all would let unrelated Chinese through,
            or rank every Chinese memory above the English one that answers a Chinese
            question. A shift, so that moving the band (a setting) moves both.
        zh_ceiling_shift: the same for the ceiling.
        cross_script_shift: for a model that reads both scripts, a memory written in
            another script than every word of the question ("what is the name of my cat"
            against "我家的猫叫小白") passes `min_score` or not on its vector part alone (its
            ranking is unchanged): its keyword part is
            0 by construction, and weighing that 0 capped its relevance at half the vector
            part, so an answer across languages never passed `min_score`. Without words to
            confirm it the band is this much stricter (both ends), which keeps an unanswered
            question out ("我的血型是什么" scores 0.804 against an English note about a
            nurse; English answers to Chinese questions 0.84-0.87, Chinese answers to
            English ones 0.82-0.83). None: the weighted mix as for any memory (MiniLM reads
            no Chinese: its cosine across scripts says nothing).
        min_score: the relevance a memory needs to be returned and counted as a hit; a
            question whose answer is not stored returns nothing (abstention).
        keyword_weight: share of the keyword part in relevance for Latin-script queries.
        keyword_weight_zh: the same for Chinese queries (MiniLM cannot read Chinese, so its
            Chinese relevance leans on exact matches; e5 can).
        related_cosine: the cosine above which a memory is what a reference phrase ("as I
            said before") points to (compression's feedback).
        supersede_cosine: the cosine from which a later memory that shares a subject with
            an earlier one restates or changes its fact (app/recall/newer.py): MiniLM's
            restatements sit at 0.57-0.80, e5's at 0.88-0.97 and lower when another line of
            the memory dilutes them (its unrelated Chinese pairs reach 0.91, which the
            shared-subject test rules out).
        count_threshold_factor: applied to `min_score` for a counting question ("有几个人在
            厦门工作", "how many colleagues live in Berlin"): the user needs every memory
            that states the attribute, also those whose value the question's condition
            rules out ("林婉清在武汉工作"), or the count is wrong. Such a memory shares the
            attribute but not the value, so its relevance sits far below an answer's, by how
            much depends on the model's band. Calibrated on counting questions written for
            the purpose (tests/recall/counting_pairs.py, Chinese and English, each with
            three memories holding the attribute and four lines of chit-chat): MiniLM's
            0.7 lets 14 of 15 English ones through and no chit-chat (it reads no Chinese:
            every Chinese line passes); e5 scores them 0.08-0.28 where they do not hold the
            value, and 0.25 lets 29 of 30 through with 9 of 40 chit-chat lines, which
            rank after them. Missing one makes the count wrong; an extra line costs tokens.
    """

    name: str
    cosine_floor: float
    cosine_ceiling: float
    zh_floor_shift: float
    zh_ceiling_shift: float
    min_score: float
    keyword_weight: float
    keyword_weight_zh: float
    related_cosine: float
    supersede_cosine: float
    count_threshold_factor: float = 0.7
    cross_script_shift: float | None = None

    def cosine_band(self, *, chinese_pair: bool) -> tuple[float, float]:
        """(floor, ceiling) for a question and a memory; `chinese_pair`: both are Chinese."""
        if chinese_pair:
            return (self.cosine_floor + self.zh_floor_shift,
                    self.cosine_ceiling + self.zh_ceiling_shift)
        return self.cosine_floor, self.cosine_ceiling

    def with_overrides(self, overrides: dict[str, Any]) -> ModelProfile:
        known = {f.name for f in fields(self)} - {"name"}
        unknown = set(overrides) - known
        if unknown:
            raise ValueError(f"ENGRAM_EMBEDDING_PROFILE: unknown field(s) {sorted(unknown)}; "
                             f"known: {sorted(known)}")
        values: dict[str, Any] = {k: float(v) for k, v in overrides.items()}
        return replace(self, **values)


MINILM = ModelProfile(
    name=MINILM_NAME, cosine_floor=0.05, cosine_ceiling=0.55,
    zh_floor_shift=0.0, zh_ceiling_shift=0.0, min_score=0.35,
    keyword_weight=0.5, keyword_weight_zh=0.6, related_cosine=0.45,
    supersede_cosine=0.55,
)

E5 = ModelProfile(
    name=E5_NAME, cosine_floor=0.76, cosine_ceiling=0.86,
    zh_floor_shift=0.08, zh_ceiling_shift=0.05, min_score=0.35,
    keyword_weight=0.5, keyword_weight_zh=0.5, related_cosine=0.84,
    supersede_cosine=0.86, count_threshold_factor=0.25, cross_script_shift=0.02,
)

GENERIC = replace(MINILM, name="generic")

KNOWN: dict[str, ModelProfile] = {p.name: p for p in (MINILM, E5)}


def profile_for(model: str, overrides: dict[str, Any] | None = None) -> ModelProfile:
    """The profile of the configured model (`ENGRAM_EMBEDDING_MODEL`), with overrides."""
    name = canonical_name(model)
    profile = KNOWN.get(name)
    if profile is None:
        profile = replace(GENERIC, name=name)
        if not overrides:
            log.warning("embedding_profile_unknown", model=name,
                        hint="set ENGRAM_EMBEDDING_PROFILE to calibrate its thresholds")
    return profile.with_overrides(overrides) if overrides else profile
