"""What ``riak-events cluster up`` runs: the services of a cluster, their configs, ports
and health checks, as plain data (no engine needed, so it is unit-tested on its own).

Two flavors:

- ``devnode``: one devnode (the single-process stand-in for Riak) whose ring maps its
  logical nodes ``dev1..devN`` to N companion containers, each on its own address, so
  the post-commit hook really sends each node's chunk keys to a different container.
- ``riak``: N Riak nodes (the image built from the user's Riak KV 3.2 package) joined into
  one cluster, each with a companion sidecar sharing its network namespace, so the hook's
  ``http://<node host>:5000`` reaches that node's own companion.

Both add one ZooKeeper and ``relocators`` relocators sharing one spool volume. Every
service keeps its data in a named volume and publishes its ports on 127.0.0.1 only.
Container names are ``<project>-<service>``; on the cluster's network they are also the
host names the services use to reach each other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

FLAVORS = ("devnode", "riak")

#: Where the project image keeps state (the image creates these, owned by its user).
STATE = "/var/lib/riak-events"

#: Companions accept key groups and serve status to the private address ranges: the
#: cluster network's address is only known once the engine made it, and these ranges
#: are reachable only from inside it (ports are published on 127.0.0.1).
PRIVATE_NETWORKS = ("127.0.0.1", "::1", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")


@dataclass(frozen=True)
class Service:
    """One container of the cluster.

    Attributes:
        name: the service's short name (``devnode``, ``companion2``, ``relocator1``...).
        role: ``node``, ``companion``, ``relocator`` or ``zookeeper``.
        image: which image (key of :class:`Images`: ``project``, ``zookeeper``, ``riak``).
        command: arguments after the image's entrypoint.
        env: environment; ``RIAK_EVENTS_CONFIG_TOML`` carries a TOML config.
        volumes: volume short name -> mount path.
        ports: container port (``"5141/tcp"``) -> host port on 127.0.0.1 (None: any free).
        health: a command run inside the container; exit status 0 means healthy.
        share_network_of: run in that service's network namespace (a sidecar).
        endpoint: the published port worth printing, and what it is.
        aliases: more names it answers to on the cluster's network (a Riak node's
            dotted name: Riak's admin tools refuse a node name without a dot).
    """

    name: str
    role: str
    image: str
    command: tuple[str, ...]
    health: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    volumes: Mapping[str, str] = field(default_factory=dict)
    ports: Mapping[str, int | None] = field(default_factory=dict)
    share_network_of: str | None = None
    endpoint: tuple[str, str] | None = None
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Topology:
    """The services of one cluster named ``project``, in start order."""

    project: str
    flavor: str
    services: tuple[Service, ...]

    def container(self, service: str) -> str:
        """The container (and host) name of a service."""
        return f"{self.project}-{service}"

    @property
    def network(self) -> str:
        return self.project

    def volume(self, short: str) -> str:
        return f"{self.project}-{short}"

    def get(self, name: str) -> Service | None:
        return next((s for s in self.services if s.name == name), None)


def http_ok(port: int, path: str) -> tuple[str, ...]:
    """Health command of the project image: ``path`` on ``port`` answers 200."""
    url = f"http://127.0.0.1:{port}{path}"
    return ("python3", "-m", "fleet.waitready", url, "--timeout-s", "2")


#: Health command of the Riak node image (deploy/images/riak-health.sh, installed in the
#: image): first-start steps done, bucket types there, the node a ring member.
RIAK_HEALTH = ("riak-events-riak-health",)


ZOOKEEPER_HEALTH = (
    "bash",
    "-c",
    'exec 3<>/dev/tcp/127.0.0.1/2181 && printf ruok >&3 && read -t 2 -n 4 r <&3 && [ "$r" = imok ]',
)


def toml_value(value: object) -> str:
    """A TOML value for a str, bool, number or list of those (JSON spells them alike)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def toml(tables: Mapping[str, Mapping[str, object]]) -> str:
    """A TOML document of flat tables (``"clusters.dc1"`` names a nested table)."""
    lines: list[str] = []
    for table, keys in tables.items():
        lines.append(f"[{table}]")
        lines += [f"{json.dumps(k) if '@' in k else k} = {toml_value(v)}" for k, v in keys.items()]
    return "\n".join(lines) + "\n"


def build(
    project: str = "riak-events",
    *,
    flavor: str = "devnode",
    nodes: int = 3,
    relocators: int = 2,
    dcs: tuple[str, ...] = ("ams1", "ams4"),
    audit_interval_s: float = 10.0,
) -> Topology:
    """The topology of one cluster.

    Args:
        project: prefix of every container, volume and of the network.
        flavor: ``devnode`` or ``riak``.
        nodes: logical nodes (devnode) or Riak nodes, each with its own companion; 1..8.
        relocators: relocators sharing one spool directory; 0..8.
        dcs: the datacenters the companions' auditors look at.
        audit_interval_s: how often each companion looks for chunks without results.

    Raises:
        ValueError: an argument out of range, naming it.
    """
    if flavor not in FLAVORS:
        raise ValueError(f"flavor must be one of {', '.join(FLAVORS)}, got {flavor!r}")
    if not 1 <= nodes <= 8:
        raise ValueError(f"nodes must be 1..8, got {nodes}")
    if not 0 <= relocators <= 8:
        raise ValueError(f"relocators must be 0..8, got {relocators}")
    if not project.replace("-", "").isalnum() or not project[0].isalpha():
        raise ValueError(f"project must be letters, digits and '-', got {project!r}")

    def host(service: str) -> str:
        return f"{project}-{service}"

    zk_hosts = f"{host('zookeeper')}:2181"
    services = [
        Service(
            name="zookeeper",
            role="zookeeper",
            image="zookeeper",
            command=(),
            health=ZOOKEEPER_HEALTH,
            volumes={"zookeeper": "/var/lib/zookeeper/data"},
            ports={"2181/tcp": None},
            endpoint=("2181/tcp", "ZooKeeper"),
        )
    ]
    if flavor == "devnode":
        names = [f"dev{i}@{host('devnode')}" for i in range(1, nodes + 1)]
        riak_urls = [f"http://{host('devnode')}:8098"]
        devnode_config: dict[str, dict[str, object]] = {
            "ring": {"ring_size": 64, "nodes": names},
            "companions": {
                n: f"http://{host(f'companion{i}')}:5000" for i, n in enumerate(names, 1)
            },
        }
        services.append(
            Service(
                name="devnode",
                role="node",
                image="project",
                command=("devnode", "--data-dir", f"{STATE}/devnode", "--listen", "0.0.0.0:8098"),
                env={"RIAK_EVENTS_CONFIG_TOML": toml(devnode_config)},
                health=http_ok(8098, "/readyz"),
                volumes={"devnode": f"{STATE}/devnode"},
                ports={"8098/tcp": None},
                endpoint=("8098/tcp", "Riak HTTP API (devnode)"),
            )
        )
        local_riak = {i: riak_urls[0] for i in range(1, nodes + 1)}
    else:
        # A dotted host part: with a bare one (riak@NAME-riak1) the node serves, but
        # `riak ping` and every `riak admin` command answer "not responding to pings"
        # (their Erlang node refuses a long name without a dot), so no step could join.
        fqdn = {i: f"{host(f'riak{i}')}.{project}" for i in range(1, nodes + 1)}
        names = [f"riak@{fqdn[i]}" for i in range(1, nodes + 1)]
        riak_urls = [f"http://{host(f'riak{i}')}:8098" for i in range(1, nodes + 1)]
        for i in range(1, nodes + 1):
            env = {"RIAK_NODENAME": names[i - 1]}
            if i == 1:
                env["RIAK_CLUSTER_SIZE"] = str(nodes)
            else:
                env["RIAK_JOIN"] = names[0]
            services.append(
                Service(
                    name=f"riak{i}",
                    role="node",
                    image="riak",
                    command=(),
                    env=env,
                    health=RIAK_HEALTH,
                    aliases=(fqdn[i],),
                    volumes={f"riak{i}": "/var/lib/riak"},
                    ports={"8098/tcp": None, "5000/tcp": None},
                    endpoint=("8098/tcp", f"Riak HTTP API ({names[i - 1]})"),
                )
            )
        # A sidecar reaches its node on the loopback of the shared network namespace.
        local_riak = {i: "http://127.0.0.1:8098" for i in range(1, nodes + 1)}
    for i in range(1, nodes + 1):
        config: dict[str, dict[str, object]] = {
            "companion": {
                "listen": "0.0.0.0:5000",
                "node": names[i - 1],
                "peers": list(PRIVATE_NETWORKS),
                "status_peers": list(PRIVATE_NETWORKS),
                "metrics_peers": list(PRIVATE_NETWORKS),
                "plugin_dirs": [f"{STATE}/plugins"],
                "entry_points": True,
                "state_dir": f"{STATE}/companion",
                "audit_interval_s": audit_interval_s,
                "audit_dcs": list(dcs),
            },
            "ring": {"nodes": names, "ring_size": 64, "n_val": 3},
            "riak": {"nodes": [local_riak[i]]},
            "zookeeper": {"hosts": zk_hosts},
        }
        sidecar = flavor == "riak"
        services.append(
            Service(
                name=f"companion{i}",
                role="companion",
                image="project",
                command=("companion",),
                env={"RIAK_EVENTS_CONFIG_TOML": toml(config)},
                health=http_ok(5000, "/healthz"),
                volumes={f"companion{i}": f"{STATE}/companion"},
                # A sidecar's ports are published by the container whose network it shares.
                ports={} if sidecar else {"5000/tcp": None},
                share_network_of=f"riak{i}" if sidecar else None,
                endpoint=None if sidecar else ("5000/tcp", f"companion of {names[i - 1]}"),
            )
        )
    for i in range(1, relocators + 1):
        relocator_config: dict[str, dict[str, object]] = {
            "relocator": {
                "data_dir": f"{STATE}/relocator",
                "udp_listen": "0.0.0.0:5140",
                "tcp_listen": "0.0.0.0:5141",
                "metrics_listen": "0.0.0.0:9141",
                "spool_dir": f"{STATE}/spool",
                "writer_id": i,
            },
            "clusters.dc1": {"nodes": riak_urls},
            "zookeeper": {"hosts": zk_hosts},
        }
        services.append(
            Service(
                name=f"relocator{i}",
                role="relocator",
                image="project",
                command=("relocator",),
                env={"RIAK_EVENTS_CONFIG_TOML": toml(relocator_config)},
                health=http_ok(9141, "/readyz"),
                volumes={f"relocator{i}": f"{STATE}/relocator", "spool": f"{STATE}/spool"},
                ports={"5141/tcp": None, "5140/udp": None, "9141/tcp": None},
                endpoint=("5141/tcp", "acknowledged TCP intake"),
            )
        )
    return Topology(project, flavor, tuple(services))
