"""Pure parts of the hardening work: URL redaction and secret files, the keyring, and the
least-privilege role plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rota.drivers.catalog import TableInfo
from rota.drivers.url import from_environment, from_file, parse, redact, scrub
from rota.errors import ConfigurationError
from rota.job import SEALED_MARK
from rota.security.encryption import Keyring, fingerprint, generate_key, keyring_from_env
from rota.security.roles import Capability, plan

SECRET = "p@ss:w/rd%41"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:hunter2@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgresql://u@h/db?password=hunter2&sslmode=require", None),
        ("postgresql://u:hunter2@h1,h2/db?sslpassword=keypw", None),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
    ],
)
def test_redact_masks_passwords_everywhere(url: str, shown: str | None) -> None:
    out = redact(url)
    assert "hunter2" not in out and "keypw" not in out
    if shown is not None:
        assert out == shown


def test_scrub_masks_the_url_and_its_password_in_any_text() -> None:
    url = "postgresql://app:s3cr%2Fet@db.internal/app"
    message = f'missing "=" after "{url}" ... password s3cr/et and s3cr%2Fet'
    cleaned = scrub(message, url)
    assert "s3cr" not in cleaned and "app:***@db.internal" in cleaned
    assert "s3cr" not in repr(parse(url))


def test_url_file_is_read_again_and_keeps_the_last_good_value(tmp_path: Path) -> None:
    path = tmp_path / "url"
    path.write_text("postgresql://app:one@h/db\n")
    url = from_file(path)
    assert url.file == str(path) and url.current() == "postgresql://app:one@h/db"
    path.write_text("postgresql://app:two@h/db")
    assert url.current() == "postgresql://app:two@h/db"  # a rotated password is seen
    path.write_text("")  # mid-rewrite
    assert url.current() == "postgresql://app:one@h/db"
    path.unlink()
    assert url.current() == "postgresql://app:one@h/db"


def test_url_file_errors_name_the_file_not_its_content(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read the database URL file"):
        from_file(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ConfigurationError, match="is empty"):
        from_file(empty)
    bad = tmp_path / "bad"
    bad.write_text(f"mysql://u:{SECRET}@h/db")
    with pytest.raises(ConfigurationError) as info:
        from_file(bad)
    assert SECRET not in str(info.value)


def test_environment_takes_a_url_or_a_file_not_both(tmp_path: Path) -> None:
    path = tmp_path / "url"
    path.write_text("postgresql://u:pw@h/db")
    assert from_environment({"ROTA_DATABASE_URL_FILE": str(path)}).file == str(path)
    assert from_environment({"ROTA_DATABASE_URL": "sqlite:///x.db"}).dialect == "sqlite"
    with pytest.raises(ConfigurationError, match="both"):
        from_environment({"ROTA_DATABASE_URL": "sqlite:///x.db", "ROTA_DATABASE_URL_FILE": "f"})


def test_keyring_seals_opens_and_rotates() -> None:
    old, new = generate_key(), generate_key()
    sealed = json.loads(Keyring([old]).seal('{"card": "4111"}'))
    assert sealed[SEALED_MARK] == 1 and sealed["key"] == fingerprint(old)
    assert "4111" not in json.dumps(sealed)
    both = Keyring([new, old])
    assert both.open(sealed) == {"card": "4111"}  # the old key still reads
    resealed = json.loads(both.reseal(sealed) or "")
    assert resealed["key"] == fingerprint(new) and both.reseal(resealed) is None
    assert Keyring([new]).open(resealed) == {"card": "4111"}
    with pytest.raises(ConfigurationError, match="none of the 1 key"):
        Keyring([generate_key()]).open(sealed)
    assert old not in repr(both) and new not in repr(both)


def test_keyring_from_env_validates_without_echoing_keys() -> None:
    with pytest.raises(ConfigurationError, match="no encryption key"):
        keyring_from_env({})
    key = generate_key()
    with pytest.raises(ConfigurationError, match="key 2 of") as info:
        keyring_from_env({"ROTA_ENCRYPTION_KEYS": f"{key},{key[:-4]}"})
    assert key[:20] not in str(info.value)
    assert keyring_from_env({"ROTA_ENCRYPTION_KEYS": f" {key} , "}).known == (fingerprint(key),)


def test_role_plan_grants_by_capability_and_defaults_new_tables_safely() -> None:
    tables = [
        TableInfo("rota_jobs", ("id", "state", "queue", "args", "result", "history", "key")),
        TableInfo("rota_api_tokens", ("name", "digest")),
        TableInfo("rota_migrations", ("version",)),
        TableInfo("rota_batches", ("id", "spec")),  # a table added by a later migration
    ]
    plans = {p.capability: p for p in plan("acme", tables)}
    grants = {c: {(g.table, g.privilege, g.columns) for g in p.grants} for c, p in plans.items()}
    assert plans[Capability.METRICS].role == "acme_metrics"
    assert ("rota_jobs", "SELECT", ("id", "state", "queue")) in grants[Capability.METRICS]
    assert ("rota_batches", "SELECT", None) in grants[Capability.METRICS]  # nothing sensitive
    assert not any(t == "rota_api_tokens" for t, _, _ in grants[Capability.METRICS])
    assert ("rota_batches", "UPDATE", None) in grants[Capability.WORKER]
    assert not any(t == "rota_api_tokens" for t, _, _ in grants[Capability.WORKER])
    enqueue = grants[Capability.ENQUEUE]
    assert ("rota_jobs", "UPDATE", ("key_active",)) in enqueue
    assert ("rota_jobs", "UPDATE", None) not in enqueue
    assert not any(p == "DELETE" for _, p, _ in enqueue | grants[Capability.REPLAY])
    with pytest.raises(ConfigurationError, match="bad role prefix"):
        plan('x"; DROP ROLE postgres; --', tables)


def test_psycopg_pool_log_records_are_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from rota.drivers import open_driver

    url = "postgresql://app:pool-s3cret@127.0.0.1:1/db"
    driver = open_driver(url)  # connects lazily: nothing is opened here
    try:
        with caplog.at_level(logging.WARNING, logger="psycopg.pool"):
            logging.getLogger("psycopg.pool").warning("error connecting: bad %r", url)
    finally:
        driver.close()
    (record,) = caplog.records
    assert "pool-s3cret" not in record.getMessage() and "app:***@" in record.getMessage()
