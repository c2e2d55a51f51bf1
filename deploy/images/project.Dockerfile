# riak-events: relocator, companion, devnode, loadgen and the CLI, from one wheel built
# from this checkout. Build context: the repository root (see /.dockerignore).
#
#   docker build -f deploy/images/project.Dockerfile -t localhost/riak-events:dev .
#
# BASE is the local Debian base (deploy/images/base.sh); with registry access any
# Debian 12 image works too: --build-arg BASE=debian:bookworm-slim.
ARG BASE=localhost/riak-events-base:bookworm

FROM ${BASE} AS build
# EXTRA_CA_CERTS: PEM certificates of a TLS-intercepting proxy between the build and PyPI
# (`riak-events cluster build` passes the host's /usr/local/share/ca-certificates).
# Only this build stage trusts them; the image that runs does not.
ARG EXTRA_CA_CERTS=""
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        python3 python3-venv python3-dev gcc libc6-dev ca-certificates >/dev/null \
    && rm -rf /var/lib/apt/lists/* \
    && if [ -n "$EXTRA_CA_CERTS" ]; then \
        printf '%s\n' "$EXTRA_CA_CERTS" >/usr/local/share/ca-certificates/extra.crt \
        && update-ca-certificates >/dev/null; fi
WORKDIR /src
COPY pyproject.toml setup.py ./
# Dependencies first, in a layer of their own: a change of the sources alone rebuilds
# only the wheel below.
RUN python3 -m venv /opt/riak-events \
    && /opt/riak-events/bin/pip install -q --no-cache-dir --upgrade pip setuptools wheel \
    && python3 -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
print('\n'.join(p['dependencies'] + p['optional-dependencies']['zookeeper']))" >/tmp/deps.txt \
    && /opt/riak-events/bin/pip install -q --no-cache-dir -r /tmp/deps.txt
COPY README.md ./
COPY sereal_codec sereal_codec
COPY eventstore eventstore
COPY devnode devnode
COPY relocator relocator
COPY companion companion
COPY substreams substreams
COPY consumer_lib consumer_lib
COPY fleet fleet
RUN /opt/riak-events/bin/pip wheel -q --no-cache-dir --no-deps --no-build-isolation \
        -w /wheels . \
    && /opt/riak-events/bin/pip install -q --no-cache-dir \
        "$(ls /wheels/riak_events-*.whl)[zookeeper]"

FROM ${BASE}
# libseccomp2: the plugin sandbox's system-call filter; tini: PID 1 that forwards
# signals and reaps what the sandbox's children leave behind.
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        python3 libseccomp2 tini >/dev/null \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/riak-events /opt/riak-events
COPY --from=build /wheels /opt/riak-events/wheels
COPY deploy/images/entrypoint.sh /usr/local/bin/riak-events-entrypoint
# The compiled Sereal core is optional in setup.py (a failed compile falls back to the
# pure-Python codec); an image without it would be several times slower, so it fails here.
RUN /opt/riak-events/bin/python -c \
    "import sereal_codec as sereal; assert sereal.IMPLEMENTATION == 'c', sereal.IMPLEMENTATION" \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/riak-events \
        --shell /usr/sbin/nologin riak-events \
    && install -d -o riak-events -g riak-events /var/lib/riak-events \
        /var/lib/riak-events/devnode /var/lib/riak-events/relocator \
        /var/lib/riak-events/companion /var/lib/riak-events/spool \
        /var/lib/riak-events/plugins
ENV PATH=/opt/riak-events/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER riak-events
WORKDIR /var/lib/riak-events
ENTRYPOINT ["/usr/bin/tini", "--", "riak-events-entrypoint"]
CMD ["--help"]
