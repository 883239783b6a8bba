"""What a reader of the docs can follow (#19): no citations of a specification they do not
have, no Job name pinned to an old schema version, one way to make the metrics role (the
NOLOGIN group role `rota db roles` makes), and `make demo` saying it installs first."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).parents[2]
PAGES = sorted((REPO / "docs").glob("*.md"))


def test_no_page_cites_the_internal_specification() -> None:
    cited = [p.name for p in PAGES if re.search(r"SEMANTICS\s*§", p.read_text())]
    assert not cited, f"pages citing SEMANTICS §: {cited}"


def test_no_page_pins_the_migrate_job_to_a_schema_version() -> None:
    pinned = [p.name for p in PAGES if re.search(r"rota-migrate-v\d", p.read_text())]
    assert not pinned, f"pages naming rota-migrate-v<number>: {pinned}"


def test_the_metrics_role_cannot_log_in_on_every_page() -> None:
    login = re.compile(r"CREATE ROLE rota_metrics\b[^;]*\bLOGIN")
    logins = [p.name for p in PAGES if login.search(p.read_text().replace("NOLOGIN", ""))]
    assert not logins, f"pages creating rota_metrics as a login role: {logins}"
    kubernetes = (REPO / "docs" / "kubernetes.md").read_text()
    assert "CREATE ROLE rota_metrics NOLOGIN" in kubernetes
    assert "IN ROLE rota_metrics" in kubernetes  # KEDA logs in as a member


def test_make_demo_says_it_is_installing() -> None:
    makefile = (REPO / "Makefile").read_text()
    recipe = makefile.split("$(STAMP): requirements.lock pyproject.toml\n", 1)[1]
    first = recipe.splitlines()[0]
    assert first.startswith("\t@echo") and "Installing" in first
    assert "demo: $(STAMP)" in makefile
