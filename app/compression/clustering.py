"""Group compression candidates into clusters, each of which becomes one summary.

Similarity of two candidates blends meaning, wording and closeness in time::

    sim = 0.5 * cos(embedding_a, embedding_b) + 0.25 * cos(tfidf_a, tfidf_b)
        + 0.25 * exp(-gap / 3)

The embedding sees paraphrases; TF-IDF over bilingual content tokens (jieba words for
Chinese) sees the exact names and numbers the small English-centred model blurs, which
matters most for Chinese text; `gap` (how many stream positions apart the two are) keeps an
episode of consecutive small talk together even when it drifts from the cat to the bakery,
while far-apart candidates only merge when they share a topic. Average-linkage
agglomerative clustering cuts the tree at `distance` (1 - sim); a cluster larger than
`max_size` is split in time order, so no summary has to cover too much.

With clustering off (the short-dialogue preset), each run of consecutive candidates is one
group instead.

scikit-learn (and SciPy under it) is imported at the first clustering, not with the app:
~96 MB resident that a server holds only once it compresses (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from app.compression.text import content_tokens, strip_roles

_EMBEDDING_SHARE = 0.5
_TFIDF_SHARE = 0.25
_TIME_SHARE = 0.25
_TIME_SCALE = 3.0


def _tfidf_similarity(texts: Sequence[str]) -> np.ndarray[Any, Any]:
    from sklearn.feature_extraction.text import TfidfVectorizer

    docs = [content_tokens(strip_roles(t)) for t in texts]
    if not any(docs):
        return np.zeros((len(texts), len(texts)))
    vectorizer = TfidfVectorizer(analyzer=lambda doc: doc, sublinear_tf=True)
    matrix = vectorizer.fit_transform(docs)  # rows are L2-normalised
    result: np.ndarray[Any, Any] = np.asarray((matrix @ matrix.T).toarray())
    return result


def similarity(texts: Sequence[str], vectors: np.ndarray[Any, Any],
               positions: Sequence[int] | None = None) -> np.ndarray[Any, Any]:
    """The blended similarity matrix of `texts` with their unit `vectors` and stream
    `positions` (default: consecutive)."""
    dense = np.clip(vectors @ vectors.T, -1.0, 1.0)
    where = np.asarray(positions if positions is not None else range(len(texts)), dtype=float)
    closeness = np.exp(-np.abs(where[:, None] - where[None, :]) / _TIME_SCALE)
    blended: np.ndarray[Any, Any] = (_EMBEDDING_SHARE * dense
                                     + _TFIDF_SHARE * _tfidf_similarity(texts)
                                     + _TIME_SHARE * closeness)
    return blended


def _split(members: list[int], max_size: int) -> list[list[int]]:
    members = sorted(members)
    parts = -(-len(members) // max_size)
    size = -(-len(members) // parts)
    return [members[i: i + size] for i in range(0, len(members), size)]


def cluster(texts: Sequence[str], vectors: np.ndarray[Any, Any], *, distance: float,
            max_size: int, positions: Sequence[int] | None = None) -> list[list[int]]:
    """Clusters of indexes into `texts` (in time order), each sorted, ordered by first member.

    Args:
        texts: candidate texts in time order.
        vectors: their unit embedding vectors, one row each.
        distance: clusters merge while their average distance stays below this.
        max_size: larger clusters are split into consecutive parts.
        positions: the candidates' positions in the namespace's stream.
    """
    from sklearn.cluster import AgglomerativeClustering

    n = len(texts)
    if n == 0:
        return []
    if n == 1:
        return [[0]]
    dist = np.clip(1.0 - similarity(texts, vectors, positions), 0.0, 2.0)
    np.fill_diagonal(dist, 0.0)
    labels = AgglomerativeClustering(
        n_clusters=None, metric="precomputed", linkage="average", distance_threshold=distance,
    ).fit_predict(dist)
    groups: dict[int, list[int]] = {}
    for index, label in enumerate(labels):
        groups.setdefault(int(label), []).append(index)
    result = [part for members in groups.values() for part in _split(members, max_size)]
    return sorted(result, key=lambda g: g[0])


def consecutive_runs(positions: Sequence[int], *, max_size: int) -> list[list[int]]:
    """Without clustering: indexes into `positions` grouped by runs of consecutive stream
    positions, each run split at `max_size`."""
    runs: list[list[int]] = []
    for index, position in enumerate(positions):
        if runs and positions[runs[-1][-1]] == position - 1 and len(runs[-1]) < max_size:
            runs[-1].append(index)
        else:
            runs.append([index])
    return runs
