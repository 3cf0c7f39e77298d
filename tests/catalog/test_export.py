"""The export service: streamed, hashed, all-or-nothing files in three formats."""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from herald.catalog.errors import ExportConflict, SourceError
from herald.catalog.export import ExportedFile, export_records, version_prefix
from herald.catalog.sources import (
    SAMPLE_COLUMNS,
    CsvSource,
    GeneratedSource,
    JsonLinesSource,
    PostgresSource,
    Row,
    sample_rows,
)
from herald.catalog.store import LocalExportStore
from herald.config import Settings
from herald.db import conninfo

ROOT = Path(__file__).resolve().parents[2]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _check_file(store: LocalExportStore, file: ExportedFile) -> None:
    path = store.path(file.key)
    assert path.stat().st_size == file.byte_size
    assert _sha256(path) == file.sha256


def _count_xml_records(path: Path) -> int:
    count = 0
    for _event, element in ET.iterparse(path, events=("end",)):
        if element.tag == "record":
            count += 1
            element.clear()
    return count


def _parse_all(store: LocalExportStore, files: list[ExportedFile]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for file in files:
        path = store.path(file.key)
        if file.format.name == "json":
            with path.open(encoding="utf-8") as handle:
                counts["json"] = len(json.load(handle))
        elif file.format.name == "xml":
            counts["xml"] = _count_xml_records(path)
        else:
            with path.open(encoding="utf-8", newline="") as handle:
                counts["csv"] = sum(1 for _ in csv.reader(handle)) - 1  # minus the header
    return counts


@pytest.mark.slow
def test_300k_records_to_three_formats_parse_and_match_their_checksums(tmp_path: Path) -> None:
    store = LocalExportStore(tmp_path / "exports")
    seen: list[int] = []
    result = export_records(
        GeneratedSource(SAMPLE_COLUMNS, lambda: sample_rows(300_000)),
        store,
        version_prefix("sample", 1),
        "sample",
        progress=seen.append,
    )
    assert result.record_count == 300_000
    assert [f.format.name for f in result.files] == ["json", "xml", "csv"]
    assert store.list("sample") == [
        "sample/v1/sample.csv",
        "sample/v1/sample.json",
        "sample/v1/sample.xml",
    ]
    for file in result.files:
        assert file.record_count == 300_000
        _check_file(store, file)
    assert _parse_all(store, result.files) == {"json": 300_000, "xml": 300_000, "csv": 300_000}
    assert seen == sorted(seen) and seen[-1] == 300_000 and len(seen) > 5


def test_values_survive_each_format(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    text = 'a, "quoted" <tag> & more\nline\ttwo\r'
    rows: list[dict[str, object]] = [
        {"id": 1, "text": text, "amount": 1.5, "flag": True, "count": 10},
        {"id": 2, "text": "Québec ✓", "amount": None, "flag": False, "count": None},
        {"id": 3, "text": ""},
    ]
    source.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    store = LocalExportStore(tmp_path / "exports")
    result = export_records(JsonLinesSource(source), store, "values/v1", "values")
    by_format = {f.format.name: store.path(f.key) for f in result.files}

    assert json.loads(by_format["json"].read_text(encoding="utf-8")) == [
        {"id": 1, "text": text, "amount": 1.5, "flag": True, "count": 10},
        {"id": 2, "text": "Québec ✓", "amount": None, "flag": False, "count": None},
        {"id": 3, "text": "", "amount": None, "flag": None, "count": None},
    ]
    records = ET.parse(by_format["xml"]).getroot().findall("record")
    assert [r.get("text") for r in records] == [text, "Québec ✓", ""]
    assert [r.get("amount") for r in records] == ["1.5", None, None]  # null: no attribute
    assert [r.get("flag") for r in records] == ["true", "false", None]
    assert [r.get("count") for r in records] == ["10", None, None]
    with by_format["csv"].open(encoding="utf-8", newline="") as handle:
        assert list(csv.reader(handle)) == [
            ["id", "text", "amount", "flag", "count"],
            ["1", text, "1.5", "true", "10"],
            ["2", "Québec ✓", "", "false", ""],
            ["3", "", "", "", ""],
        ]


def test_typed_values_and_odd_column_names(tmp_path: Path) -> None:
    moment = dt.datetime(2025, 5, 6, 7, 8, 9, tzinfo=dt.UTC)
    token = uuid.UUID("12345678-1234-5678-1234-567812345678")
    rows: list[Row] = [
        (1, Decimal("1.10"), moment, token, b"\x00\xff", 2.5),
        (None, None, None, None, None, None),
    ]
    columns = ["100%", "price", "at", "token", "raw", "ratio"]
    store = LocalExportStore(tmp_path / "exports")
    source = GeneratedSource(columns, lambda: iter(rows))
    result = export_records(source, store, "typed/v1", "typed", formats=["json", "csv"])
    json_path, csv_path = (store.path(f.key) for f in result.files)
    assert json.loads(json_path.read_bytes()) == [
        {
            "100%": 1,
            "price": "1.10",
            "at": "2025-05-06T07:08:09+00:00",
            "token": str(token),
            "raw": "AP8=",
            "ratio": 2.5,
        },
        dict.fromkeys(columns),
    ]
    assert csv_path.read_bytes().decode().splitlines()[1] == (
        f"1,1.10,2025-05-06T07:08:09+00:00,{token},AP8=,2.5"
    )
    with pytest.raises(SourceError, match="not a valid XML element name"):
        export_records(source, store, "typed/v2", "typed", formats=["xml"])
    with pytest.raises(SourceError, match="a record has 1 values for 2 columns"):
        export_records(
            GeneratedSource(["a", "b"], lambda: iter([(1, 2), (3,)])), store, "typed/v4", "typed"
        )
    with pytest.raises(SourceError, match="type object cannot be exported"):
        export_records(
            GeneratedSource(["a"], lambda: iter([(object(),)])), store, "typed/v3", "typed"
        )


def test_csv_source_streams_text_values(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_text('code,label\r\nA1,"x, y"\r\nB2,plain\r\n', encoding="utf-8")
    store = LocalExportStore(tmp_path / "exports")
    result = export_records(CsvSource(source), store, "codes/v1", "codes", formats=["json"])
    assert result.columns == ["code", "label"]
    assert json.loads(store.path(result.files[0].key).read_bytes()) == [
        {"code": "A1", "label": "x, y"},
        {"code": "B2", "label": "plain"},
    ]


async def test_postgres_source_streams_a_table_and_a_query(
    tmp_path: Path, settings: Settings
) -> None:
    assert settings.database_url is not None
    info = conninfo(settings.database_url, settings.schema)
    with psycopg.connect(info, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE measures (id int PRIMARY KEY, label text, value numeric, "
            "taken_at timestamptz, ok boolean)"
        )
        conn.execute(
            "INSERT INTO measures SELECT g, 'm' || g, g / 4.0, "
            "timestamptz '2025-01-01 00:00+00' + g * interval '1 minute', g % 2 = 0 "
            "FROM generate_series(1, 12000) g"
        )
        conn.execute("UPDATE measures SET label = NULL WHERE id = 7")
    store = LocalExportStore(tmp_path / "exports")
    table = export_records(
        PostgresSource.table(info, "measures", batch_size=1000), store, "measures/v1", "measures"
    )
    assert table.columns == ["id", "label", "value", "taken_at", "ok"]
    assert _parse_all(store, table.files) == {"json": 12_000, "xml": 12_000, "csv": 12_000}
    for file in table.files:
        _check_file(store, file)
    first = json.loads(store.path("measures/v1/measures.json").read_bytes())[0]
    assert first == {
        "id": 1,
        "label": "m1",
        "value": "0.25000000000000000000",
        "taken_at": "2025-01-01T00:01:00+00:00",
        "ok": False,
    }

    query = PostgresSource(info, "SELECT id FROM measures WHERE id <= %(n)s ORDER BY id", {"n": 5})
    small = export_records(query, store, "measures/v2", "measures", formats=["csv"])
    assert small.record_count == 5
    assert store.path("measures/v2/measures.csv").read_bytes() == b"id\r\n1\r\n2\r\n3\r\n4\r\n5\r\n"


def test_a_failing_source_leaves_nothing_visible(tmp_path: Path) -> None:
    def rows() -> Iterator[Row]:
        yield from sample_rows(5_000)
        raise SourceError("the source broke mid-stream")

    store = LocalExportStore(tmp_path / "exports")
    with pytest.raises(SourceError, match="mid-stream"):
        export_records(GeneratedSource(SAMPLE_COLUMNS, rows), store, "broken/v1", "broken")
    assert store.list() == []
    assert list((tmp_path / "exports").rglob("*")) == [
        tmp_path / "exports" / "broken",
        tmp_path / "exports" / "broken" / "v1",
    ]


def test_progress_callback_failure_aborts_the_export(tmp_path: Path) -> None:
    def lost_lease(done: int) -> None:
        raise RuntimeError(f"lease lost after {done} records")

    store = LocalExportStore(tmp_path / "exports")
    source = GeneratedSource(SAMPLE_COLUMNS, lambda: sample_rows(50_000))
    with pytest.raises(RuntimeError, match="lease lost"):
        export_records(source, store, "lost/v1", "lost", progress=lost_lease)
    assert store.list() == []


_KILLED_EXPORT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from herald.catalog.export import export_records
    from herald.catalog.sources import SAMPLE_COLUMNS, GeneratedSource, sample_rows
    from herald.catalog.store import LocalExportStore

    def report(done):
        print(done, flush=True)
        if done >= 20_000:
            sys.stdin.readline()  # wait here until the parent kills us

    source = GeneratedSource(SAMPLE_COLUMNS, lambda: sample_rows(10_000_000))
    export_records(source, LocalExportStore(Path(sys.argv[1])), "killed/v1", "killed",
                   progress=report, progress_every=10_000)
    """
)


def test_a_killed_export_leaves_no_visible_partial_file(tmp_path: Path) -> None:
    root = tmp_path / "exports"
    with subprocess.Popen(
        [sys.executable, "-c", _KILLED_EXPORT, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    ) as proc:
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if int(line) >= 20_000:
                    break
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    store = LocalExportStore(root)
    assert store.list() == []
    assert not store.exists("killed/v1/killed.json")
    partials = sorted(p.name for p in (root / "killed" / "v1").iterdir())
    assert len(partials) == 3 and all(p.startswith(".") and p.endswith(".part") for p in partials)
    assert all(p.stat().st_size > 0 for p in (root / "killed" / "v1").iterdir())
    # A retry produces complete files beside the abandoned ones; the sweep removes those.
    retry = export_records(
        GeneratedSource(SAMPLE_COLUMNS, lambda: sample_rows(1_000)), store, "killed/v1", "killed"
    )
    assert all(f.record_count == 1_000 for f in retry.files)
    assert store.sweep_partials(older_than=3600) == 0  # still fresh: could be a live export
    assert store.sweep_partials(older_than=0) == 3
    assert sorted(p.name for p in (root / "killed" / "v1").iterdir()) == [
        "killed.csv",
        "killed.json",
        "killed.xml",
    ]


def test_existing_files_are_immutable(tmp_path: Path) -> None:
    store = LocalExportStore(tmp_path / "exports")
    source = GeneratedSource(SAMPLE_COLUMNS, lambda: sample_rows(10))
    first = export_records(source, store, "fixed/v1", "fixed", formats=["csv"])
    with pytest.raises(ExportConflict, match="immutable"):
        export_records(source, store, "fixed/v1", "fixed")
    assert store.list() == ["fixed/v1/fixed.csv"]
    _check_file(store, first.files[0])
    assert store.delete("fixed/v1/fixed.csv") is True
    assert store.delete("fixed/v1/fixed.csv") is False  # idempotent


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"a": 1}\n{"a": {"nested": true}}\n', "nested dict"),
        ('{"a": 1}\n{"a": 2, "b": 3}\n', "field\\(s\\) the first record does not have"),
        ('{"a": 1}\nnot json\n', "line 2"),
        ('{"a": 1.5}\n{"a": NaN}\n', "not finite"),
        ('{"a": "bell \\u0007"}\n', "control character"),
        ('{"first name": 1}\n', "not a valid XML element name"),
        ("", "holds no records"),
    ],
)
def test_bad_records_fail_clearly_and_write_nothing(
    tmp_path: Path, content: str, message: str
) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_text(content, encoding="utf-8")
    store = LocalExportStore(tmp_path / "exports")
    with pytest.raises(SourceError, match=message):
        export_records(JsonLinesSource(source), store, "bad/v1", "bad")
    assert store.list() == []
    assert not any(p.is_file() for p in (tmp_path / "exports").rglob("*"))


def test_bad_csv_and_bad_names_are_refused(tmp_path: Path) -> None:
    source = tmp_path / "bad.csv"
    source.write_text("a,b\n1,2\n3\n", encoding="utf-8")
    store = LocalExportStore(tmp_path / "exports")
    with pytest.raises(SourceError, match="line 3: 1 values for 2 columns"):
        export_records(CsvSource(source), store, "bad/v1", "bad")
    with pytest.raises(SourceError, match="cannot read"):
        export_records(CsvSource(tmp_path / "missing.csv"), store, "bad/v1", "bad")
    with pytest.raises(ValueError, match="invalid dataset id"):
        version_prefix("../escape", 1)
    with pytest.raises(ValueError, match="invalid export key"):
        store.path("a/../b")
    with pytest.raises(ValueError, match="unknown export format"):
        export_records(CsvSource(source), store, "bad/v1", "bad", formats=["parquet"])
    assert store.list() == []
