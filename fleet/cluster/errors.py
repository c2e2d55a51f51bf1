"""Errors of ``riak-events cluster``: one root, leaves named for what happened."""

from __future__ import annotations

from typing import ClassVar

from fleet.errors import FleetError


class ClusterError(FleetError):
    """Root of every error ``fleet.cluster`` raises on purpose."""


class EngineUnreachable(ClusterError):
    """No Docker Engine API answers at ``DOCKER_HOST`` (or the default socket)."""

    retriable: ClassVar[bool] = True

    def __init__(self, docker_host: str, reason: str) -> None:
        self.docker_host = docker_host
        super().__init__(
            f"no container engine at DOCKER_HOST={docker_host}: start Docker or "
            f"`podman system service` ({reason})"
        )


class ImageBuildFailed(ClusterError):
    """An image did not build; the message ends with the last lines of the build log."""

    def __init__(self, image: str, reason: str) -> None:
        self.image = image
        super().__init__(f"image {image} did not build: {reason}")


class RiakImageMissing(ClusterError):
    """The Riak node image is needed but not built, and no Riak package was given."""

    def __init__(self, image: str) -> None:
        self.image = image
        super().__init__(
            f"image {image} is missing: build it from your Riak KV 3.2 package with "
            "`riak-events cluster build --riak-package FILE` (deploy/README.md)"
        )


class NotHealthy(ClusterError):
    """A service did not pass its health check in time; the message names its last answer."""

    retriable: ClassVar[bool] = True

    def __init__(self, container: str, timeout_s: float, last: str) -> None:
        self.container = container
        super().__init__(f"{container} not healthy after {timeout_s:g} s: {last}")


class ServiceExited(ClusterError):
    """A service's container exited while ``up`` waited for it (a first-start step that
    failed, a crash): the message names its exit code and the last line it printed."""

    retriable: ClassVar[bool] = False

    def __init__(self, container: str, exit_code: int, last_line: str) -> None:
        self.container = container
        self.exit_code = exit_code
        super().__init__(f"{container} exited with status {exit_code}: {last_line}")


class UnknownService(ClusterError):
    """``kill`` or ``logs`` named a service the cluster does not have."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        super().__init__(f"no service {name!r} in this cluster; services: {', '.join(known)}")
