"""Recall's numeric constants, in one reviewed table.

Constants of the pipeline, not settings: each was chosen by measuring on LoCoMo (both role
protocols) and MemDaily with `bench/locomo.py`, no deployment has a reason of its own to turn
one, and a change moves the figures only together with the others. What a model decides
(thresholds, cosine bands, keyword weights) is its profile's (app/embedding/profiles.py);
what an operator decides is a setting (app/config.py). Each line says why the value is what
it is; change one only with a before/after `bench/locomo.py --dump` on all three sets.
"""

from __future__ import annotations

# --- search ---
# Memories taken from each search (vector and keyword); also the corpus of the keyword
# weights, so it does not grow with top_k (the best memory would change with top_k).
CANDIDATES = 50
# Memories taken from the small extra search inside a date window or a referenced session:
# enough for a day or a session to compete, small next to CANDIDATES.
WINDOW_CANDIDATES = 20
# Seconds a namespace's memory count is trusted when deciding index or exact scan: the
# count changes slowly, and reading it is a query per recall.
NAMESPACE_SIZE_TTL = 60.0

# Sessions whose pending messages (stored with wait=false, not built yet) a search returns
# as provisional memories: a store's few new turns, not a whole import being built.
PENDING_CANDIDATES = 10
# Pending messages of one session a provisional memory holds (the best matching, in order):
# a whole import being built would otherwise be one memory larger than any budget.
PENDING_LINES = 8
# Pending messages whose lines' vectors (and firewalled words) recall keeps between recalls
# (read-your-writes: the same new turns are asked about until their build lands).
PENDING_TEXTS = 1_000

# --- hop ---
# Memories whose lines a second hop may start from: the best memory's line is not always
# the one naming the thing asked about (a day of notes sharing common words outranks it).
HOP_FROM = 3
# A hop's line names something beyond the question (what it identifies) when the line
# holds at least this share of the question's terms that some candidate holds...
NAMES_FROM = 0.5
# ...and only in terms held by at most this share of the candidates (a speaker's name, in
# every line, names nothing).
NAMES_HELD_BY = 0.5

# --- query ---
# Text shorter than this (characters) is not a question of its own: what follows a wrapper's
# marker ("我真正想问的是：") is searched only from this length, and a short piece of a
# compound query stays with the one before it.
MIN_QUESTION_CHARS = 4
# Sub-questions searched apart at most; the rest are searched together as the last one.
MAX_QUESTION_PARTS = 4

# --- score ---
# Score factor for memories inside a date the query names ("on 3 June", "上周").
TIME_BOOST = 1.4
# Importance 10 multiplies the score by 1.05, importance 1 by 0.96: a tie-breaker, not a
# ranking of its own.
IMPORTANCE_BOOST = 0.05
# A memory of another branch, when other_branches is asked for: shown, after the branch's own.
OTHER_BRANCH_FACTOR = 0.8
# What a reference phrase ("as I said before") points to: the session it names, or
# questions when it is about a question.
REFERENCE_BOOST = 1.25
# Tier factors: long-term facts (and compression summaries) ahead of daily digests, ahead
# of session details that match as well.
TIER_BOOST = {"longterm": 1.15, "daily": 1.05, "session": 1.0}

# --- threshold ---
# The user says the memory exists ("as I said before"): min_score is lowered by this.
REFERENCE_THRESHOLD_FACTOR = 0.7
# Once a memory passes min_score, weaker ones holding a word of the question down to this
# share of it fill what the budget leaves, as the answer's context; 0.7 gave the whole gain
# of min_score 0 on LoCoMo while a question without an answer still gets nothing.
CONTEXT_THRESHOLD_FACTOR = 0.7
# Scores equal to this many decimals are ties, broken by the more recent memory.
TIE_DECIMALS = 3

# --- newer facts (newer.py) ---
# How far down a recall's ranking a newer statement is looked for: the head is what the
# budget returns; further down a reorder changes nothing a caller sees.
NEWER_WINDOW = 10
# Older memories looked at per new memory after a build: the closest few by cosine are the
# only ones that can pass `supersede_cosine`.
SUPERSEDE_NEIGHBOURS = 5
# After a build, the nearest memories the new one's terms are weighed among (`Rarity`): the
# namespace's memories nearest to it, where its subject's words would recur if common.
RARITY_NEIGHBOURS = 30
# The share of the newer memory's terms the older one must hold to be about the same thing:
# one word in common is not enough ("上午" in a check-up note and in a stand-up note, both
# close for e5); "We moved from Berlin to Munich" holds one of its five terms, Berlin, of
# "We live in Berlin". Set on the pairs of tests/recall/test_newer_facts.py and the notes of
# tests/embedding/test_calibration.py, written for the purpose.
SUBJECT_SHARE = 0.2
# A later statement that only says "now" / "现在" about a fact (no verb of change) goes ahead
# of the older one when its relevance is at least this share of the older one's: on our
# changed-fact scenarios such changes matched 0.76-1.8x as well as the fact they changed,
# while chat lines that say "现在" of something else (MemDaily) matched 0.34-0.57x.
NOW_CHANGE_SHARE = 0.75

# --- pack ---
# A statement memory's matching lines (its core): at least this share of its best line's
# share of the query's terms.
FOCUS_RATIO = 0.5
# Packing stops when fewer tokens than this are left: no memory line is that short.
MIN_TOKENS_LEFT = 8
# Memories that did not fit tried before packing stops, per top_k: each try costs a
# tokenization, and far down the list they barely match.
MISSES_PER_TOP_K = 2
# Token counts cached (texts change rarely; tokenizing is packing's costliest step).
TOKEN_CACHE_SIZE = 50_000
