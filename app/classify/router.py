"""Classify any text: category, confidence, scores, entities, importance."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter

from app.classify.analyzer import analyze
from app.classify.schemas import ClassifyPublic, ClassifyRequest
from app.deps import CurrentPrincipal
from app.errors import error_responses

router = APIRouter(prefix="/v1", tags=["classify"])


@router.post("/classify", response_model=ClassifyPublic,
             responses=error_responses(400, 401, 422))
async def classify(body: ClassifyRequest, _: CurrentPrincipal) -> ClassifyPublic:
    """Understand a text the way stored memories are understood (Chinese, English, mixed)."""
    # Regexes and jieba are CPU-bound: keep them off the event loop.
    return ClassifyPublic.from_analysis(await asyncio.to_thread(analyze, body.text))
