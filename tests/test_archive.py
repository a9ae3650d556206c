"""Export and import as a .tar.gz: streamed out, and read back as an archive from a stranger."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir.cli import cli
from memdir.errors import ConfigError
from memdir.store.archive import ArchiveError, import_archive, unpack_archive, write_archive
from memdir.store.transfer import export_workspace, workspace_files
from memdir.workspace import Workspace
from test_transfer import _fill, _tree

MiB = 1 << 20


class WriteOnly:
    """A sink that can only be written to, like a socket or an HTTP response."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.chunks.append(bytes(data))
        return len(data)


class ReadOnly:
    """A source that can only be read, like a request body."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def read(self, size: int = -1) -> bytes:
        return self._data.read(size)


def archive(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    """A .tar.gz of exactly these members (the hostile ones included)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, **fields: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in fields.items():
        setattr(info, key, value)
    return info


def file(name: str, text: str = "- a fact\n") -> tuple[tarfile.TarInfo, bytes]:
    return member(name), text.encode()


# -- a round trip -------------------------------------------------------------------------------


def test_a_workspace_goes_through_an_archive_byte_for_byte(
    tmp_path: Path, any_ws: Workspace
) -> None:
    source = Workspace(tmp_path / "src")
    _fill(source)
    source.write_text(".memdir-server/keys.json", '{"keys": []}\n')
    sink = WriteOnly()  # streamed: never seeks, never reads back
    written = write_archive(source, sink, all_namespaces=True)
    assert written.namespaces == [None, "bob"] and written.files > 10
    data = b"".join(sink.chunks)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = tar.getnames()
    assert "ns/bob/MEMORY.md" in names and not any(".memdir-server" in n for n in names)
    loaded = import_archive(ReadOnly(data), any_ws, all_namespaces=True)
    assert loaded.files == written.files and loaded.bytes == written.bytes
    back = tmp_path / "back"
    export_workspace(any_ws, back, all_namespaces=True)
    plain = tmp_path / "plain"
    export_workspace(source, plain, all_namespaces=True)
    assert _tree(back) == _tree(plain)
    again = import_archive(ReadOnly(data), any_ws, all_namespaces=True)
    assert again.files == 0 and again.unchanged == written.files


def test_an_archive_made_by_tar_of_a_directory_imports(tmp_path: Path, any_ws: Workspace) -> None:
    # `tar -C dir -czf x.tgz .` names its members ./MEMORY.md and has a "./" directory first
    data = archive(
        (member("./", tarfile.DIRTYPE), None),
        (member("./memory", tarfile.DIRTYPE), None),
        file("./memory/2026-11-30.md", "- from tar\n"),
        file("./MEMORY.md", "- curated\n"),
    )
    report = import_archive(io.BytesIO(data), any_ws)
    assert report.files == 2 and any_ws.read_text("memory/2026-11-30.md") == "- from tar\n"


def test_the_cli_exports_and_imports_an_archive(tmp_path: Path, pg_url: str) -> None:
    runner = CliRunner()
    source = Workspace(tmp_path / "src")
    _fill(source)
    target = tmp_path / "memory.tar.gz"
    out = runner.invoke(
        cli, ["-w", str(source.root), "export", "--to", str(target), "--all-namespaces"]
    )
    assert out.exit_code == 0, out.output
    assert target.is_file() and [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []
    again = runner.invoke(cli, ["-w", str(source.root), "export", "--to", str(target)])
    assert again.exit_code == 1 and "exists" in again.output
    loaded = runner.invoke(cli, ["-w", pg_url, "import", str(target), "--all-namespaces", "--json"])
    assert loaded.exit_code == 0, loaded.output
    assert json.loads(loaded.stdout)["conflicts"] == []
    bob = runner.invoke(cli, ["-w", pg_url, "-n", "bob", "get", "MEMORY.md"])
    assert "bob's own" in bob.stdout
    notes = tmp_path / "notes.txt"
    notes.write_text("not an archive")
    wrong = runner.invoke(cli, ["-w", pg_url, "import", str(notes)])
    assert wrong.exit_code == 2 and "neither a directory nor a .tar.gz" in wrong.output
    evil = tmp_path / "evil.tgz"
    evil.write_bytes(archive(file("../../escaped.md")))
    refused = runner.invoke(cli, ["-w", pg_url, "import", str(evil)])
    assert refused.exit_code == 1 and refused.stdout == ""
    assert refused.stderr.startswith("Error: archive member '../../escaped.md' leads out")
    assert refused.stderr.count("\n") == 1


# -- hostile archives: refused whole, nothing written -------------------------------------------

link = member("memory/x.md", tarfile.SYMTYPE, linkname="/etc/passwd")
HOSTILE = {
    "absolute": (archive(file("/etc/cron.d/evil")), "absolute"),
    "dotdot": (archive(file("../evil.md")), r"\.\."),
    "dotdot inside": (archive(file("memory/../../evil.md")), r"\.\."),
    "symlink": (archive((link, None)), "a symlink"),
    "hard link": (
        archive(
            file("MEMORY.md"), (member("memory/y.md", tarfile.LNKTYPE, linkname="MEMORY.md"), None)
        ),
        "a hard link",
    ),
    "device": (
        archive((member("memory/dev", tarfile.CHRTYPE, devmajor=1, devminor=3), None)),
        "a device",
    ),
    "fifo": (archive((member("memory/fifo.md", tarfile.FIFOTYPE), None)), "a FIFO"),
    "backslash": (archive(file("memory\\..\\..\\evil.md")), "backslash"),
    "control character": (archive(file("memory/a\nb.md")), "control character"),
    "empty part": (archive(file("memory//x.md")), "empty"),
    "too long": (archive(file("memory/" + "x" * 300 + ".md")), "too long"),
    "twice": (archive(file("MEMORY.md", "- one\n"), file("MEMORY.md", "- two\n")), "twice"),
    "file for a directory": (archive(file("memory"), file("memory/x.md")), "cannot be unpacked"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_member_refuses_the_whole_archive(
    tmp_path: Path, any_ws: Workspace, case: str
) -> None:
    data, message = HOSTILE[case]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(ArchiveError, match=message) as caught:
        import_archive(io.BytesIO(data), any_ws, scratch=scratch)
    assert caught.value.reason == "member" and "\n" not in str(caught.value)
    assert workspace_files(any_ws) == []  # nothing loaded
    assert list(scratch.iterdir()) == []  # and nothing left behind


def test_a_member_never_lands_outside_the_directory(tmp_path: Path) -> None:
    target = tmp_path / "in"
    target.mkdir()
    for data, _ in HOSTILE.values():
        with pytest.raises(ArchiveError):
            unpack_archive(io.BytesIO(data), target)
    assert not (tmp_path / "evil.md").exists() and not (tmp_path.parent / "evil.md").exists()
    assert not any(p.is_symlink() or not (p.is_file() or p.is_dir()) for p in target.rglob("*"))


def test_too_many_members_are_refused(any_ws: Workspace) -> None:
    data = archive(*(file(f"memory/n{i}.md") for i in range(11)))
    with pytest.raises(ArchiveError, match="more than 10 members") as caught:
        import_archive(io.BytesIO(data), any_ws, max_files=10)
    assert caught.value.reason == "files" and workspace_files(any_ws) == []
    assert import_archive(io.BytesIO(data), any_ws, max_files=11).files == 11


def test_a_gzip_bomb_stops_at_the_limit(any_ws: Workspace) -> None:
    # 64 MiB of zeros in one member: 64 KiB on the wire
    bomb = archive((member("memory/zeros.md"), bytes(64 * MiB)))
    assert len(bomb) < MiB
    with pytest.raises(ArchiveError, match="more than 1,048,576 bytes") as caught:
        import_archive(io.BytesIO(bomb), any_ws, max_bytes=MiB)
    assert caught.value.reason == "bytes" and workspace_files(any_ws) == []
    # the same through many small members
    many = archive(*((member(f"memory/z{i}.md"), bytes(MiB // 4)) for i in range(5)))
    with pytest.raises(ArchiveError, match="more than") as caught:
        import_archive(io.BytesIO(many), any_ws, max_bytes=MiB)
    assert caught.value.reason == "bytes" and workspace_files(any_ws) == []


def test_a_bomb_in_a_header_is_cut_off_unread(tmp_path: Path) -> None:
    # A pax header declaring 64 MiB: tarfile would read all of it into memory to parse it.
    head = tarfile.TarInfo("././@PaxHeader")
    head.type, head.size = tarfile.XHDTYPE, 64 * MiB
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)  # gzip framing
    parts = [packer.compress(head.tobuf(tarfile.USTAR_FORMAT))]
    zeros = bytes(MiB)
    parts += [packer.compress(zeros) for _ in range(64)]
    parts.append(packer.flush())
    bomb = b"".join(parts)
    assert len(bomb) < MiB
    with pytest.raises(ArchiveError) as caught:
        unpack_archive(io.BytesIO(bomb), tmp_path, max_bytes=MiB)
    assert caught.value.reason == "bytes"


@pytest.mark.parametrize(
    "data",
    [b"just text, not an archive\n", gzip.compress(b"gzip, but no tar inside" * 40), b""],
    ids=["text", "gzip of text", "empty"],
)
def test_what_is_not_a_tar_gz_is_refused_clearly(any_ws: Workspace, data: bytes) -> None:
    with pytest.raises(ArchiveError, match="not a gzip-compressed tar") as caught:
        import_archive(io.BytesIO(data), any_ws)
    assert caught.value.reason == "format"


def test_a_cut_off_archive_loads_nothing(any_ws: Workspace) -> None:
    whole = archive(file("MEMORY.md"), (member("memory/big.md"), bytes(200_000)))
    with pytest.raises(ArchiveError, match="not a gzip-compressed tar"):
        import_archive(io.BytesIO(whole[: len(whole) // 2]), any_ws)
    assert workspace_files(any_ws) == []


def test_an_archive_cannot_reach_past_its_target(tmp_path: Path, any_ws: Workspace) -> None:
    # into one namespace: another namespace's files, the keys and the index are not reached
    alice = any_ws.namespaced("alice")
    with pytest.raises(ConfigError, match="all-namespaces"):
        import_archive(io.BytesIO(archive(file("ns/bob/MEMORY.md", "- planted\n"))), alice)
    assert any_ws.namespaced("bob").read_text("MEMORY.md") == ""
    data = archive(
        file("MEMORY.md", "- alice\n"),
        file(".memdir-server/keys.json", '{"keys": ["forged"]}'),
        file(".index/memory_index.db", "not a database"),
    )
    report = import_archive(io.BytesIO(data), alice)
    assert report.files == 1 and workspace_files(alice) == ["MEMORY.md"]
    assert any_ws.read_text(".memdir-server/keys.json") == ""
