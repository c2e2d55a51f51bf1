"""Run a :class:`~fleet.cluster.topology.Topology` on a container engine.

Everything goes through the Docker Engine API with the ``docker`` SDK, so the same code
drives Docker and podman's API socket (``podman system service``). Containers, the
network and the volumes carry the label ``riak-events.project=<project>``; ``down``
removes what has it, nothing else.

Health is checked by running each service's health command inside its container
(``exec``), not by reading the engine's health status: podman runs health checks only
through systemd timers, which a container host may not have, and an exec answers the
same on both engines.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fleet.cluster.errors import (
    EngineUnreachable,
    NotHealthy,
    ServiceExited,
    UnknownService,
)
from fleet.cluster.images import Images
from fleet.cluster.topology import Service, Topology

PROJECT_LABEL = "riak-events.project"
SERVICE_LABEL = "riak-events.service"
ROLE_LABEL = "riak-events.role"
#: The health command, so that status works whatever options created the container.
HEALTH_LABEL = "riak-events.health"


def connect(timeout_s: float = 120.0) -> Any:
    """A ``docker.DockerClient`` for ``DOCKER_HOST`` (or the default socket), checked alive.

    Raises:
        EngineUnreachable: no engine answers there (one line naming DOCKER_HOST).
        ImportError: the ``docker`` package is missing (``pip install 'riak-events[deploy]'``).
    """
    import docker  # noqa: PLC0415  (optional: the deploy extra; imported when used)

    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if where.startswith("unix://"):
        # Probed here first: the SDK leaks its socket when the connect fails.
        path = where.removeprefix("unix://")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(5.0)
            try:
                probe.connect(path)
            except OSError as exc:
                raise EngineUnreachable(where, exc.strerror or str(exc)) from exc
    try:
        client = docker.from_env(timeout=int(timeout_s))
    except docker.errors.DockerException as exc:
        raise EngineUnreachable(where, _first_line(exc)) from exc
    try:
        client.ping()
    except docker.errors.DockerException as exc:
        client.close()
        raise EngineUnreachable(where, _first_line(exc)) from exc
    return client


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _is_sidecar(container: Any) -> bool:
    mode = (container.attrs.get("HostConfig") or {}).get("NetworkMode") or ""
    return str(mode).startswith("container:")


def _not_found(exc: BaseException) -> bool:
    return type(exc).__name__ == "NotFound"


@dataclass(frozen=True)
class Endpoint:
    """One published port of a running service."""

    service: str
    what: str
    address: str  # 127.0.0.1:PORT


class Cluster:
    """One cluster (``topology.project``) on one engine."""

    def __init__(self, client: Any, topology: Topology) -> None:
        self.client = client
        self.topology = topology

    # -- lookups ----------------------------------------------------------------------

    def _labels(self, service: str | None = None) -> dict[str, str]:
        labels = {PROJECT_LABEL: self.topology.project}
        if service is not None:
            labels[SERVICE_LABEL] = service
        return labels

    def container(self, service: str) -> Any | None:
        """The container of ``service``, or None when it does not exist."""
        try:
            return self.client.containers.get(self.topology.container(service))
        except Exception as exc:
            if _not_found(exc):
                return None
            raise

    def _containers(self) -> list[Any]:
        labels = [f"{PROJECT_LABEL}={self.topology.project}"]
        return list(self.client.containers.list(all=True, filters={"label": labels}))

    def services(self) -> list[str]:
        """The services that have a container now, whatever topology created them."""
        return sorted(str(c.labels.get(SERVICE_LABEL, c.name)) for c in self._containers())

    def _require(self, service: str) -> Any:
        found = self.container(service)
        if found is None or found.labels.get(PROJECT_LABEL) != self.topology.project:
            raise UnknownService(service, self.services())
        return found

    def published(self, service: str, port: str) -> str | None:
        """``127.0.0.1:PORT`` where ``port`` (``"5141/tcp"``) of ``service`` is published."""
        container = self.container(service)
        if container is None:
            return None
        container.reload()
        bindings = (container.attrs.get("NetworkSettings") or {}).get("Ports") or {}
        for binding in bindings.get(port) or ():
            if binding.get("HostPort"):
                return f"{binding.get('HostIp') or '127.0.0.1'}:{binding['HostPort']}"
        return None

    # -- up ---------------------------------------------------------------------------

    def _network(self) -> None:
        if not self.client.networks.list(names=[self.topology.network]):
            self.client.networks.create(
                self.topology.network, driver="bridge", labels=self._labels()
            )

    def _volumes(self) -> None:
        wanted = {v for s in self.topology.services for v in s.volumes}
        for short in sorted(wanted):
            name = self.topology.volume(short)
            try:
                self.client.volumes.get(name)
            except Exception as exc:
                if not _not_found(exc):
                    raise
                self.client.volumes.create(name, labels=self._labels())

    def _create(self, service: Service, images: Images) -> Any:
        name = self.topology.container(service.name)
        kwargs: dict[str, Any] = {
            "image": images.for_key(service.image),
            "command": list(service.command) or None,
            "name": name,
            "environment": dict(service.env),
            "labels": self._labels(service.name)
            | {ROLE_LABEL: service.role, HEALTH_LABEL: json.dumps(list(service.health))},
            "volumes": {
                self.topology.volume(short): {"bind": path, "mode": "rw"}
                for short, path in service.volumes.items()
            },
            "healthcheck": {
                "test": ["CMD", *service.health],
                "interval": 5_000_000_000,
                "timeout": 5_000_000_000,
                "retries": 3,
                "start_period": 60_000_000_000,
            },
            "detach": True,
        }
        if service.share_network_of is not None:
            kwargs["network_mode"] = (
                f"container:{self.topology.container(service.share_network_of)}"
            )
        else:
            kwargs["hostname"] = name
            kwargs["network"] = self.topology.network
            if service.aliases:
                endpoint = self.client.api.create_endpoint_config(aliases=list(service.aliases))
                kwargs["networking_config"] = {self.topology.network: endpoint}
            kwargs["ports"] = {
                port: ("127.0.0.1", host) if host else ("127.0.0.1",)
                for port, host in service.ports.items()
            }
        return self.client.containers.create(**kwargs)

    def up(
        self,
        images: Images,
        *,
        timeout_s: float = 180.0,
        progress: Callable[[str], None] = lambda line: None,
    ) -> list[Endpoint]:
        """Create what is missing, start what is stopped, wait until every service is healthy.

        Idempotent: running containers are left alone, so ``up`` after ``kill`` restarts
        only the killed service.

        Raises:
            NotHealthy: a service did not pass its health check within ``timeout_s``.
        """
        self._network()
        self._volumes()
        for service in self.topology.services:
            container = self.container(service.name) or self._create(service, images)
            container.reload()
            if container.status != "running":
                progress(f"starting {container.name}")
                container.start()
        self.wait_healthy(timeout_s=timeout_s)
        return self.endpoints()

    def start(self, service: str) -> None:
        """Start one stopped (e.g. killed) service again."""
        self._require(service).start()

    # -- health -----------------------------------------------------------------------

    def check(self, service: str) -> str | None:
        """Run the service's health command inside it; None when healthy, else why not."""
        container = self.container(service)
        if container is None:
            return "no container"
        container.reload()
        if container.status != "running":
            return f"container {container.status}"
        command = json.loads(container.labels.get(HEALTH_LABEL, "[]"))
        if not command:
            return None
        code, output = container.exec_run(command, demux=False)
        if code == 0:
            return None
        text = (output or b"").decode(errors="replace").strip().splitlines()
        return f"exit {code}: {text[-1][:200] if text else ''}"

    def wait_healthy(self, *, timeout_s: float, services: list[str] | None = None) -> None:
        """Wait until these services (default: all) pass their health checks.

        Raises:
            NotHealthy: the first one still failing at the deadline, with its last answer.
        """
        pending = [s for s in self.topology.services if services is None or s.name in services]
        deadline = time.monotonic() + timeout_s
        last: dict[str, str] = {}
        while pending:
            still = []
            for service in pending:
                failure = self.check(service.name)
                if failure is not None:
                    self._raise_if_exited(service.name)
                    last[service.name] = failure
                    still.append(service)
            pending = still
            if not pending:
                return
            if time.monotonic() > deadline:
                first = pending[0]
                raise NotHealthy(
                    self.topology.container(first.name), timeout_s, last.get(first.name, "")
                )
            time.sleep(1.0)

    def _raise_if_exited(self, service: str) -> None:
        """Raise :class:`ServiceExited` when the service's container stopped by itself: its
        entrypoint failed (a Riak node whose first-start steps failed exits non-zero)."""
        container = self.container(service)
        if container is None or container.status not in ("exited", "dead"):
            return
        code = int(container.attrs.get("State", {}).get("ExitCode", -1))
        lines = self.logs(service, tail=20).strip().splitlines()
        raise ServiceExited(self.topology.container(service), code, lines[-1] if lines else "")

    # -- status, logs, kill, down -----------------------------------------------------

    def endpoints(self) -> list[Endpoint]:
        """The published ports worth printing, per service, in start order."""
        found = []
        for service in self.topology.services:
            if service.endpoint is None:
                continue
            port, what = service.endpoint
            address = self.published(service.name, port)
            if address is not None:
                found.append(Endpoint(service.name, what, address))
        return found

    def status(self) -> list[tuple[str, str, str]]:
        """(service, container state, health) of every container of the cluster."""
        rows = []
        for container in sorted(self._containers(), key=lambda c: str(c.name)):
            service = str(container.labels.get(SERVICE_LABEL, container.name))
            failure = self.check(service) if container.status == "running" else "-"
            rows.append((service, str(container.status), failure or "healthy"))
        return rows

    def logs(self, service: str, *, tail: int = 200) -> str:
        """The last ``tail`` lines of a service's output (stdout and stderr)."""
        data = self._require(service).logs(tail=tail, stdout=True, stderr=True)
        return bytes(data).decode(errors="replace")

    def kill(self, service: str, signal: str = "SIGKILL") -> None:
        """Stop one service abruptly (a failure drill); ``up`` or :meth:`start` restarts it."""
        self._require(service).kill(signal=signal)

    def down(self, *, volumes: bool = False) -> list[str]:
        """Remove the cluster's containers and network (and its volumes when asked).

        Returns:
            the names of what was removed.
        """
        removed = []
        labels = [f"{PROJECT_LABEL}={self.topology.project}"]
        containers = self._containers()
        # Sidecars first: a container whose network namespace another uses cannot go first.
        containers.sort(key=lambda c: not _is_sidecar(c))
        for container in containers:
            container.remove(force=True)
            removed.append(container.name)
        for network in self.client.networks.list(names=[self.topology.network]):
            network.remove()
            removed.append(f"network {network.name}")
        if volumes:
            for volume in self.client.volumes.list(filters={"label": labels}):
                volume.remove(force=True)
                removed.append(f"volume {volume.name}")
        return removed
