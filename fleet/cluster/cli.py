"""``riak-events cluster``: a whole cluster in containers, through the Docker Engine API.

    riak-events cluster up [--nodes 3] [--relocators 2] [--flavor devnode|riak]
    riak-events cluster status | logs SERVICE | kill SERVICE | down [--volumes]
    riak-events cluster build [--riak-package FILE]

Works against Docker and against podman's API socket (``DOCKER_HOST=unix://...``).
Needs the ``deploy`` extra (the ``docker`` SDK) and, to build images, this checkout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from fleet.cluster import topology as topo
from fleet.cluster.engine import Cluster, connect
from fleet.cluster.errors import ClusterError
from fleet.cluster.images import Builder, Images, default_source

_project = click.option(
    "--project",
    default="riak-events",
    show_default=True,
    help="Prefix of the containers, volumes and the network.",
)


def _client() -> Any:
    try:
        return connect()
    except ImportError as exc:
        raise click.ClickException(
            "the cluster command needs the docker SDK: pip install 'riak-events[deploy]'"
        ) from exc
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from exc


def _builder(client: Any, source: Path | None) -> Builder:
    source = source or default_source()
    if source is None:
        raise click.ClickException(
            "images are built from a riak-events checkout: give --source PATH"
        )
    return Builder(client, source, progress=lambda line: click.echo(line, err=True))


@click.group("cluster")
def cluster() -> None:
    """Run a whole riak-events cluster in containers (Docker or podman)."""


@cluster.command("build")
@click.option(
    "--source",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The checkout to build from (default: the one this runs from).",
)
@click.option(
    "--riak-package",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="A Riak KV 3.2 .deb or release tarball: build the Riak image.",
)
def build_command(source: Path | None, riak_package: Path | None) -> None:
    """Build the images that are missing (each tagged with a hash of its inputs)."""
    client = _client()
    try:
        images = _builder(client, source).all(riak_package=riak_package)
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from exc
    for key, tag in (
        ("project", images.project),
        ("zookeeper", images.zookeeper),
        ("riak", images.riak),
    ):
        if tag:
            click.echo(f"{key:10} {tag}")


@cluster.command("up")
@_project
@click.option(
    "--flavor",
    type=click.Choice(topo.FLAVORS),
    default="devnode",
    show_default=True,
    help="devnode: one devnode with N logical nodes; riak: N Riak nodes.",
)
@click.option(
    "--nodes",
    type=click.IntRange(1, 8),
    default=3,
    show_default=True,
    help="Nodes, each with its own companion container.",
)
@click.option("--relocators", type=click.IntRange(0, 8), default=2, show_default=True)
@click.option(
    "--dcs",
    default="ams1,ams4",
    show_default=True,
    help="Datacenters the companions' auditors look at.",
)
@click.option("--audit-interval-s", type=float, default=10.0, show_default=True)
@click.option(
    "--timeout-s",
    type=float,
    default=180.0,
    show_default=True,
    help="How long to wait for every service to be healthy.",
)
@click.option("--source", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option(
    "--riak-package", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None
)
def up(
    *,
    project: str,
    flavor: str,
    nodes: int,
    relocators: int,
    dcs: str,
    audit_interval_s: float,
    timeout_s: float,
    source: Path | None,
    riak_package: Path | None,
) -> None:
    """Build missing images, start every service, wait until healthy, print endpoints."""
    try:
        topology = topo.build(
            project,
            flavor=flavor,
            nodes=nodes,
            relocators=relocators,
            dcs=tuple(d for d in dcs.split(",") if d),
            audit_interval_s=audit_interval_s,
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    client = _client()
    try:
        images: Images = _builder(client, source).all(
            riak_package=riak_package, need_riak=flavor == "riak"
        )
        endpoints = Cluster(client, topology).up(
            images, timeout_s=timeout_s, progress=lambda line: click.echo(line, err=True)
        )
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"cluster {project} is up ({flavor}, {nodes} nodes, {relocators} relocators)")
    for endpoint in endpoints:
        click.echo(f"  {endpoint.service:12} {endpoint.address:22} {endpoint.what}")


@cluster.command("status")
@_project
def status(project: str) -> None:
    """Every container of the cluster, its state and its health check's answer."""
    rows = Cluster(_client(), topo.build(project)).status()
    if not rows:
        click.echo(f"no cluster {project}")
        return
    for service, state, health in rows:
        click.echo(f"{service:12} {state:10} {health}")


@cluster.command("logs")
@_project
@click.argument("service")
@click.option("--tail", type=int, default=200, show_default=True)
def logs(project: str, service: str, tail: int) -> None:
    """The last lines of one service's output."""
    try:
        click.echo(Cluster(_client(), topo.build(project)).logs(service, tail=tail), nl=False)
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from exc


@cluster.command("kill")
@_project
@click.argument("service")
def kill(project: str, service: str) -> None:
    """Stop one service with SIGKILL (a failure drill); `cluster up` starts it again."""
    try:
        Cluster(_client(), topo.build(project)).kill(service)
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"killed {project}-{service} (SIGKILL)")


@cluster.command("down")
@_project
@click.option("--volumes", is_flag=True, help="Also delete the data volumes.")
def down(project: str, volumes: bool) -> None:
    """Remove the cluster's containers and network (data volumes only with --volumes)."""
    for name in Cluster(_client(), topo.build(project)).down(volumes=volumes):
        click.echo(f"removed {name}")
