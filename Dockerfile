# prtriage: the GitHub App service (`prtriage serve`) and its workers (`prtriage worker`).
#
#   docker build -t prtriage .
#   docker run --security-opt seccomp=deploy/seccomp.json --security-opt apparmor=unconfined \
#       --security-opt systempaths=unconfined --security-opt no-new-privileges:true --cap-drop ALL \
#       -p 8000:8000 -e GITHUB_APP_ID=... -e GITHUB_PRIVATE_KEY_PATH=/run/secrets/key \
#       -e GITHUB_WEBHOOK_SECRET=... -v prtriage-data:/data prtriage
#
#   docker run --rm <the same options> prtriage prtriage demo --once
#       (the App end to end inside the image: exit 0 only when the sandbox works there)
#
# The sandbox is bubblewrap, which creates user namespaces and mounts its root, and mounts a fresh /proc:
# Docker's default seccomp profile refuses the first (deploy/seccomp.json is that profile plus exactly the
# calls bubblewrap needs, written by scripts/seccomp_profile.py), its AppArmor profile refuses every mount,
# and the kernel refuses the last while the engine masks paths under /proc (systempaths=unconfined unmasks
# them; podman: --security-opt unmask=ALL). Nothing here needs a capability. docs/service.md ("Docker and
# compose") explains each option. Without them every analysis completes its check run action_required (which
# blocks a required check) saying there is no sandbox, never neutral or success; repository code never runs
# unsandboxed in the service. tini is the entrypoint: no --init needed.
#
#   docker build --build-arg PREBUILD_POLICIES="radixark/miles THUDM/slime" -t prtriage .
#       (the analysis environments of those built-in policies built into the image: see below)
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# bubblewrap: the sandbox; git: `prtriage check --repo`; tini: reaps what a killed sandbox leaves behind
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap git tini \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 10001 --user-group --shell /usr/sbin/nologin prtriage \
    && mkdir -p /data /cache \
    && chown prtriage:prtriage /data /cache

# A regular install, every dependency pinned (constraints.txt: what the tests ran with); the package carries
# its policies, migrations and the demo's example, so the source is not kept.
WORKDIR /srv/prtriage
COPY pyproject.toml README.md constraints.txt ./
COPY app ./app
COPY policies ./policies
COPY migrations ./migrations
COPY examples ./examples
RUN pip install -c constraints.txt . \
    && cd / && rm -rf /srv/prtriage
WORKDIR /data

# Analysis environments built into the image for these built-in policies (owner/name, space separated), so
# that a repository's first pull request does not wait for pip: `--build-arg PREBUILD_POLICIES="radixark/miles
# THUDM/slime"`. They land in /cache/envs, which a new named volume on /cache starts with (compose). For the
# policies with torch, `--build-arg PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu` gives a CPU
# build of a few hundred MB instead of PyPI's CUDA build of several GB.
ARG PREBUILD_POLICIES=""
ARG PIP_EXTRA_INDEX_URL=""
RUN for slug in $PREBUILD_POLICIES; do \
        policy=$(python -c 'import sys; from app.analysis.core.policy import POLICIES_DIR as d; p = d / f"{sys.argv[1]}.yml"; print(p if p.is_file() else "")' "$slug"); \
        [ -n "$policy" ] || { echo "PREBUILD_POLICIES: no built-in policy $slug" >&2; exit 1; }; \
        PRTRIAGE_CACHE_DIR=/cache prtriage env build --policy "$policy" || exit 1; \
    done \
    && chown -R prtriage:prtriage /cache

USER prtriage
ENV PRTRIAGE_HOST=0.0.0.0 \
    PRTRIAGE_PORT=8000 \
    PRTRIAGE_DATA_DIR=/data \
    PRTRIAGE_CACHE_DIR=/cache
VOLUME ["/data", "/cache"]
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(f\"http://127.0.0.1:{os.environ.get('PRTRIAGE_PORT', '8000')}/healthz\", timeout=4)"]

# SIGTERM stops serve and worker gracefully: the jobs in hand finish first (give them time: docker stop -t).
STOPSIGNAL SIGTERM
ENTRYPOINT ["tini", "--"]
CMD ["prtriage", "serve"]
