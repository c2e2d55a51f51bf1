"""The images of a cluster, built through the Docker Engine API and reused by content.

Each image is tagged with a hash of everything it is built from (its Dockerfile, the
files it copies, its base image's id and its build arguments), so an image whose tag
exists is up to date and is never rebuilt, and a change of any input builds a new one.
The base image is a minimal Debian made by ``deploy/images/base.sh`` (debootstrap, no
registry); its root-filesystem tarball is kept in the cache directory, keyed by the
hash of that script, so a second machine-local run only imports it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet.cluster.errors import ImageBuildFailed, RiakImageMissing

log = logging.getLogger(__name__)

#: The files and folders of the checkout the project image is built from.
PROJECT_INPUTS = (
    "pyproject.toml",
    "setup.py",
    "README.md",
    "sereal_codec",
    "eventstore",
    "devnode",
    "relocator",
    "companion",
    "substreams",
    "consumer_lib",
    "fleet",
    "deploy/images/project.Dockerfile",
    "deploy/images/entrypoint.sh",
)
ZOOKEEPER_INPUTS = ("deploy/images/zookeeper.Dockerfile", "deploy/images/zoo.cfg")
RIAK_INPUTS = (
    "deploy/images/riak.Dockerfile",
    "deploy/images/riak-entrypoint.sh",
    "deploy/images/riak-health.sh",
    "deploy/images/merge-advanced-config.escript",
    "deploy/riak",
    "erlang_hooks/src",
)
#: Build output and caches inside input folders: never part of an image.
_SKIP_DIRS = {"__pycache__", "ebin", "_build", ".mypy_cache", ".pytest_cache"}
_SKIP_SUFFIXES = (".pyc", ".so", ".o")

BASE_REPOSITORY = "localhost/riak-events-base"
SUITE = "bookworm"
#: Where Debian keeps locally added certificate authorities (a proxy's, a company's).
LOCAL_CA_DIR = Path("/usr/local/share/ca-certificates")


def default_cache_dir() -> Path:
    """``$RIAK_EVENTS_IMAGE_CACHE``, else ``$XDG_CACHE_HOME/riak-events`` or ``~/.cache/...``."""
    given = os.environ.get("RIAK_EVENTS_IMAGE_CACHE")
    if given:
        return Path(given)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "riak-events"


def default_source() -> Path | None:
    """The checkout this module runs from, when it has ``deploy/images`` (else None)."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "deploy" / "images" / "project.Dockerfile").exists() else None


def _files(source: Path, paths: Iterable[str]) -> list[Path]:
    found: list[Path] = []
    for rel in paths:
        path = source / rel
        if path.is_file():
            found.append(path)
            continue
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
            found += [Path(dirpath) / f for f in filenames if not f.endswith(_SKIP_SUFFIXES)]
    return sorted(found)


def inputs_hash(source: Path, paths: Iterable[str], extra: Mapping[str, str] = {}) -> str:
    """sha256 over the relative path and content of every input file, and ``extra``."""
    digest = hashlib.sha256()
    for path in _files(source, paths):
        digest.update(str(path.relative_to(source)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    for key in sorted(extra):
        digest.update(f"{key}={extra[key]}\0".encode())
    return digest.hexdigest()


def local_ca_certs(directory: Path = LOCAL_CA_DIR) -> str:
    """The PEM text of the locally added CAs (empty when there are none)."""
    if not directory.is_dir():
        return ""
    return "".join(p.read_text() for p in sorted(directory.rglob("*.crt")))


@dataclass(frozen=True)
class Images:
    """The tags of the images a cluster runs."""

    project: str
    zookeeper: str
    riak: str | None = None

    def for_key(self, key: str) -> str:
        tag = {"project": self.project, "zookeeper": self.zookeeper, "riak": self.riak}[key]
        if tag is None:
            raise RiakImageMissing("localhost/riak-events-riak")
        return tag


class Builder:
    """Builds (or finds) the images of one checkout through a docker SDK client.

    Args:
        client: a ``docker.DockerClient`` (Docker, or podman's API socket).
        source: the checkout (build context); see :func:`default_source`.
        cache_dir: where the base tarball is kept between runs.
        progress: called with one line per step, for the user.
        extra_ca_certs: PEM text a build stage trusts to reach PyPI through a proxy.
    """

    def __init__(
        self,
        client: Any,
        source: Path,
        *,
        cache_dir: Path | None = None,
        progress: Callable[[str], None] = lambda line: None,
        extra_ca_certs: str | None = None,
    ) -> None:
        self.client = client
        self.source = source
        self.cache_dir = cache_dir or default_cache_dir()
        self.progress = progress
        self.extra_ca_certs = local_ca_certs() if extra_ca_certs is None else extra_ca_certs

    def _exists(self, tag: str) -> bool:
        try:
            self.client.images.get(tag)
        except Exception as exc:  # docker.errors.ImageNotFound, without importing docker here
            if type(exc).__name__ in {"ImageNotFound", "NotFound"}:
                return False
            raise
        return True

    def base(self) -> str:
        """The base image's tag, importing (and first making) its tarball when missing.

        Raises:
            ImageBuildFailed: debootstrap or the import failed.
        """
        script = self.source / "deploy" / "images" / "base.sh"
        digest = inputs_hash(self.source, ["deploy/images/base.sh"], {"suite": SUITE})[:12]
        tag = f"{BASE_REPOSITORY}:{SUITE}-{digest}"
        if self._exists(tag):
            return tag
        tarball = self.cache_dir / f"base-{SUITE}-{digest}.tar"
        if not tarball.exists():
            self.progress(f"making the base root filesystem with debootstrap -> {tarball}")
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            argv = ["sh", str(script), str(tarball)]
            if os.geteuid() != 0:
                if shutil.which("sudo") is None:
                    raise ImageBuildFailed(tag, f"debootstrap needs root: sudo {' '.join(argv)}")
                argv = ["sudo", *argv]
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise ImageBuildFailed(tag, (done.stderr or done.stdout).strip()[-2000:])
        self.progress(f"importing {tarball.name} as {tag}")
        try:
            with tarball.open("rb") as data:
                answer = self.client.api.import_image_from_data(
                    data, repository=BASE_REPOSITORY, tag=tag.split(":")[1]
                )
            if not self._exists(tag):
                # podman's compatible API ignores the tag of an import: tag it by its id.
                ids = re.findall(r"[0-9a-f]{64}", str(answer))
                if not ids:
                    raise ImageBuildFailed(tag, f"import answered no image id: {answer!r}")
                self.client.images.get(ids[-1]).tag(BASE_REPOSITORY, tag.split(":")[1])
            self.client.images.get(tag).tag(BASE_REPOSITORY, SUITE)
        except ImageBuildFailed:
            raise
        except Exception as exc:
            raise ImageBuildFailed(tag, f"import failed: {exc}") from exc
        return tag

    def build(
        self,
        repository: str,
        dockerfile: str,
        inputs: Iterable[str],
        *,
        base: str,
        args: Mapping[str, str] | None = None,
    ) -> str:
        """The tag of ``repository`` built from these inputs, building it when missing.

        Raises:
            ImageBuildFailed: the build failed; the message ends with its last lines.
        """
        base_id = str(self.client.images.get(base).id)
        build_args = {"BASE": base, **(args or {})}
        digest = inputs_hash(self.source, inputs, {"base": base_id, **build_args})[:12]
        tag = f"{repository}:{digest}"
        if self._exists(tag):
            self.progress(f"{tag}: up to date")
            return tag
        self.progress(f"building {tag} from {dockerfile}")
        if self.extra_ca_certs and "EXTRA_CA_CERTS" not in build_args:
            # Not part of the hash: which proxy a build went through does not change it.
            build_args["EXTRA_CA_CERTS"] = self.extra_ca_certs
        tail: list[str] = []
        try:
            stream = self.client.api.build(
                path=str(self.source),
                dockerfile=dockerfile,
                tag=tag,
                buildargs=build_args,
                rm=True,
                decode=True,
                labels={"riak-events.inputs": digest},
            )
            for chunk in stream:
                if "error" in chunk:
                    raise ImageBuildFailed(tag, " | ".join([*tail[-15:], str(chunk["error"])]))
                line = str(chunk.get("stream", "")).rstrip()
                if line:
                    tail.append(line)
                    log.debug("build %s: %s", tag, line)
        except ImageBuildFailed:
            raise
        except Exception as exc:
            raise ImageBuildFailed(tag, f"{type(exc).__name__}: {exc}") from exc
        if not self._exists(tag):
            raise ImageBuildFailed(tag, " | ".join(tail[-15:]) or "no image was tagged")
        self.progress(f"built {tag}")
        self._prune(repository, keep=tag)
        return tag

    def _prune(self, repository: str, *, keep: str) -> None:
        """Remove the images of ``repository`` older builds left (hash tags), when unused.

        A container still using one keeps it (the engine refuses); disk does not grow
        with every change of the sources.
        """
        for image in self.client.images.list(name=repository):
            tags = [t for t in image.tags if t.startswith(f"{repository}:")]
            stale = tags and all(
                re.fullmatch(r"[0-9a-f]{12}", t.rsplit(":", 1)[1]) and t != keep for t in tags
            )
            if not stale:
                continue
            try:
                self.client.images.remove(image.id)
            except Exception as exc:  # in use by a container, or already gone
                log.debug("keeping %s: %s", tags, exc)

    def all(self, *, riak_package: Path | None = None, need_riak: bool = False) -> Images:
        """Every image a cluster needs (the Riak one only when asked for or given a package).

        Args:
            riak_package: a Riak KV 3.2 ``.deb`` or release tarball; copied into
                ``deploy/images/riak/`` (the build context) when it is elsewhere.
            need_riak: the cluster runs Riak nodes: without a package, the newest Riak
                image built before is used, else :class:`RiakImageMissing`.
        """
        base = self.base()
        # The two builds side by side: one waits on downloads while the other compiles,
        # which is most of a first build's time on a fresh machine.
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="image-build") as pool:
            project_build = pool.submit(
                self.build,
                "localhost/riak-events",
                "deploy/images/project.Dockerfile",
                PROJECT_INPUTS,
                base=base,
            )
            zookeeper_build = pool.submit(
                self.build,
                "localhost/riak-events-zookeeper",
                "deploy/images/zookeeper.Dockerfile",
                ZOOKEEPER_INPUTS,
                base=base,
            )
            project, zookeeper = project_build.result(), zookeeper_build.result()
        riak: str | None = None
        if riak_package is not None:
            riak = self.riak(riak_package, base=base)
        elif need_riak:
            riak = self._latest("localhost/riak-events-riak")
            if riak is None:
                raise RiakImageMissing("localhost/riak-events-riak")
        return Images(project=project, zookeeper=zookeeper, riak=riak)

    def riak(self, package: Path, *, base: str) -> str:
        """The Riak node image built from the user's Riak KV 3.2 package."""
        folder = self.source / "deploy" / "images" / "riak"
        folder.mkdir(exist_ok=True)
        inside = folder / package.name
        if package.resolve() != inside.resolve():
            shutil.copyfile(package, inside)
        rel = str(inside.relative_to(self.source))
        return self.build(
            "localhost/riak-events-riak",
            "deploy/images/riak.Dockerfile",
            [*RIAK_INPUTS, rel],
            base=base,
            args={"RIAK_PACKAGE": rel},
        )

    def _latest(self, repository: str) -> str | None:
        images = self.client.images.list(name=repository)
        if not images:
            return None
        newest = max(images, key=lambda image: str(image.attrs.get("Created", "")))
        tags = [t for t in newest.tags if t.startswith(repository)]
        return str(tags[0]) if tags else None
