"""Who is acting: an explicit Principal, the owner of an API token, or (neither given)
someone with direct database access, who acts as admin and is recorded as such."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rota.auth import Permission, Principal
from rota.auth.feature import TokensFeature
from rota.errors import ArgumentsError

if TYPE_CHECKING:
    from rota.app import App


def resolve(
    app: App, principal: Principal | None, token: str | None, needs: Permission
) -> Principal:
    """The acting principal, checked for `needs` (PermissionDeniedError otherwise)."""
    if principal is not None and token is not None:
        raise ArgumentsError("pass principal= or token=, not both")
    if principal is not None and not isinstance(principal, Principal):
        raise ArgumentsError(f"principal= takes a rota.Principal, not {type(principal).__name__}")
    if token is not None:
        principal = app.feature(TokensFeature).api.authenticate(token)
    elif principal is None:
        principal = Principal.direct()
    principal.require(needs)
    return principal
