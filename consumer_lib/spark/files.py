"""The few file operations the jobs need, through Hadoop's FileSystem API (the JVM's),
so an output directory may be local, HDFS or any file system Spark writes to.

Renames are atomic on local file systems and HDFS; object stores (S3, GCS) copy and
delete instead, so a reader there may see a directory half replaced (see DESIGN.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

__all__ = ["Entry", "HadoopFiles"]


@dataclass(frozen=True)
class Entry:
    """One directory entry."""

    name: str
    path: str
    is_dir: bool
    size_bytes: int


class HadoopFiles:
    """Files under one root, through the session's Hadoop configuration.

    Args:
        spark: the session (its JVM and Hadoop configuration).
        root: a path or URI (``/data/out``, ``hdfs://nn/out``, ``file:///tmp/out``).
    """

    def __init__(self, spark: SparkSession, root: str) -> None:
        jvm: Any = spark._jvm
        self._path_class = jvm.org.apache.hadoop.fs.Path
        conf = spark._jsc.hadoopConfiguration()
        fs = self._path_class(root).getFileSystem(conf)
        # The local file system adds hidden .crc files beside each file (and hides them
        # from listings); its raw layer shows them, so the jobs can remove them.
        wrapper = jvm.java.lang.Class.forName("org.apache.hadoop.fs.FilterFileSystem")
        while fs.getUri().getScheme() == "file" and wrapper.isInstance(fs):
            fs = fs.getRawFileSystem()
        self._fs = fs
        self.root = str(self._fs.makeQualified(self._path_class(root)).toString())

    def path(self, *parts: str) -> str:
        """``root/part/part...``."""
        return "/".join([self.root.rstrip("/"), *parts])

    def _p(self, path: str) -> Any:
        return self._path_class(path)

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._p(path)))

    def delete(self, path: str) -> None:
        """Remove a file or a whole directory (nothing if absent)."""
        self._fs.delete(self._p(path), True)

    def mkdirs(self, path: str) -> None:
        self._fs.mkdirs(self._p(path))

    def rename(self, src: str, dst: str) -> None:
        """Raises: OSError when the file system refuses."""
        if not self._fs.rename(self._p(src), self._p(dst)):
            raise OSError(f"rename {src} -> {dst} failed")

    def list(self, path: str) -> list[Entry]:
        """The entries of a directory, sorted by name (empty if absent)."""
        if not self.exists(path):
            return []
        found = [
            Entry(
                str(s.getPath().getName()),
                str(s.getPath().toString()),
                bool(s.isDirectory()),
                int(s.getLen()),
            )
            for s in self._fs.listStatus(self._p(path))
        ]
        return sorted(found, key=lambda e: e.name)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a small file: to a temporary name beside it, then renamed into place."""
        parent, _, name = path.rpartition("/")
        tmp = f"{parent}/.{name}.tmp"
        stream = self._fs.create(self._p(tmp), True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()
        self.delete(path)
        self.rename(tmp, path)
