# ZooKeeper from Debian's package: one standalone server for relocator ownership, the
# companions' live znodes and the substream registry. Build context: the repository root.
#
#   docker build -f deploy/images/zookeeper.Dockerfile -t localhost/riak-events-zookeeper:dev .
ARG BASE=localhost/riak-events-base:bookworm
FROM ${BASE}
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        zookeeper default-jre-headless >/dev/null \
    && rm -rf /var/lib/apt/lists/* \
    && install -d -o zookeeper -g zookeeper /var/lib/zookeeper/data
COPY deploy/images/zoo.cfg /etc/riak-events/zoo.cfg
USER zookeeper
VOLUME /var/lib/zookeeper/data
EXPOSE 2181
# Healthy when it answers the four-letter word ruok with imok (bash's /dev/tcp: no netcat).
HEALTHCHECK --interval=5s --timeout=3s --start-period=20s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/2181 && printf ruok >&3 && read -t 2 -n 4 r <&3 && [ \"$r\" = imok ]"]
CMD ["java", "-Xmx256m", "-XX:+UseSerialGC", "-cp", \
     "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar", \
     "org.apache.zookeeper.server.quorum.QuorumPeerMain", "/etc/riak-events/zoo.cfg"]
