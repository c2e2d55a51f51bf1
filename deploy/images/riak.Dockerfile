# A Riak KV 3.2 node with the riak-events hook, built FROM the Riak release you supply
# (none is downloaded): an OpenRiak/Basho .deb package or a release tarball (`make rel`
# output, packed), placed in deploy/images/riak/ (ignored by git). Context: the repo root.
#
#   docker build -f deploy/images/riak.Dockerfile \
#       --build-arg RIAK_PACKAGE=deploy/images/riak/riak_3.2.5-OTP26_amd64.deb \
#       -t localhost/riak-events-riak:compose .
#   # or: riak-events cluster build --riak-package PATH   (copies it there, tags by hash)
#
# What it adds: the hook's modules (compiled by the release's own erlc when it ships one,
# else by Debian's: BEAM files load on their OTP release and later ones), riak.conf's
# multi-backend fragment and the advanced.config of deploy/riak/ (merged into the stock
# one), an entrypoint that names the node after its host, joins the cluster and creates
# the bucket types on the first start (deploy/riak/bucket-types.sh). The companion runs
# beside it as a sidecar container sharing its network namespace (deploy/README.md).
ARG BASE=localhost/riak-events-base:bookworm

FROM ${BASE} AS riak
ARG RIAK_PACKAGE=deploy/images/riak/riak.deb
COPY ${RIAK_PACKAGE} /tmp/riak-package
# A .deb brings its dependencies through apt and installs to /usr/lib/riak, /etc/riak,
# /var/lib/riak with a riak user; a tarball release is unpacked to /opt/riak and laid
# out the same way (symlinks), run by a riak user made here.
RUN apt-get update -qq \
    && if dpkg-deb --info /tmp/riak-package >/dev/null 2>&1; then \
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            /tmp/riak-package tini procps >/dev/null; \
    else \
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            libssl3 libncurses6 libstdc++6 tini procps >/dev/null \
        && mkdir -p /opt/riak && tar -xf /tmp/riak-package -C /opt/riak \
        && if [ ! -x /opt/riak/bin/riak ] && [ -x /opt/riak/riak/bin/riak ]; then \
            mv /opt/riak/riak /opt/riak.tmp && rmdir /opt/riak && mv /opt/riak.tmp /opt/riak; fi \
        && test -x /opt/riak/bin/riak \
        && useradd --system --home-dir /var/lib/riak --shell /bin/bash riak \
        && mkdir -p /var/lib/riak /var/log/riak \
        && rm -rf /opt/riak/data /opt/riak/log && ln -s /var/lib/riak /opt/riak/data \
        && ln -s /var/log/riak /opt/riak/log && ln -s /opt/riak/etc /etc/riak \
        && ln -s /opt/riak/bin/riak /usr/sbin/riak \
        && chown -R riak:riak /opt/riak /var/lib/riak /var/log/riak; \
    fi \
    && rm -rf /var/lib/apt/lists/* /tmp/riak-package

FROM riak AS hook
COPY erlang_hooks/src /build/src
COPY deploy/riak/advanced.config /build/advanced.config
COPY deploy/images/merge-advanced-config.escript /build/
# Debian's Erlang in this stage only: to merge advanced.config, and to compile the hook
# when the release ships no erlc of its own (its own is preferred: same OTP release).
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        erlang-nox >/dev/null \
    && mkdir -p /build/ebin && cd /build \
    && erlc=$(ls /usr/lib/riak/erts-*/bin/erlc /opt/riak/erts-*/bin/erlc 2>/dev/null | head -1) \
    && if [ -z "$erlc" ] || ! "$erlc" +debug_info -o ebin src/*.erl; then \
        echo "compiling the hook with Debian's erlc (OTP $(erl -noshell -eval \
            'io:put_chars(erlang:system_info(otp_release)), halt().'))"; \
        erlc +debug_info -o ebin src/*.erl; \
    fi \
    && cp src/riak_events_hook.app.src ebin/riak_events_hook.app \
    && escript merge-advanced-config.escript /etc/riak/advanced.config advanced.config \
        /build/advanced.config.merged

FROM riak
COPY --from=hook /build/ebin /opt/riak-events/erlang_hooks/ebin
COPY --from=hook /build/advanced.config.merged /etc/riak/advanced.config
COPY deploy/riak/riak.conf.fragment deploy/riak/advanced.config deploy/riak/bucket-types.sh \
    /opt/riak-events/riak/
COPY deploy/images/riak-entrypoint.sh /usr/local/bin/riak-events-riak-entrypoint
COPY deploy/images/riak-health.sh /usr/local/bin/riak-events-riak-health
# The guide's two edits of riak.conf (erlang_hooks/README.md step 3), once, at build;
# advanced.config was merged in the hook stage (stock sections kept).
RUN conf=/etc/riak/riak.conf \
    && sed -i -e '/^storage_backend *=/d' -e '/^multi_backend\.name\./d' \
        -e '/^listener\.http\.internal *=/d' -e '/^listener\.protobuf\.internal *=/d' \
        -e '/^nodename *=/d' "$conf" \
    && cat /opt/riak-events/riak/riak.conf.fragment >>"$conf" \
    && printf '%s\n' 'listener.http.internal = 0.0.0.0:8098' \
        'listener.protobuf.internal = 0.0.0.0:8087' 'nodename = riak@127.0.0.1' >>"$conf" \
    && chown -R riak:riak /etc/riak/ 2>/dev/null || true
VOLUME /var/lib/riak
# The one health check (also run by `riak-events cluster` and compose): first-start steps
# done, bucket types answering 200, this node a ring member.
HEALTHCHECK --interval=5s --timeout=15s --start-period=120s --retries=3 \
    CMD ["riak-events-riak-health"]
EXPOSE 8098 8087 5000
ENTRYPOINT ["/usr/bin/tini", "--", "riak-events-riak-entrypoint"]
