"""Who may do what: roles, the permissions they grant, and API tokens that carry a role."""

from rota.auth.roles import Permission, Principal, Role, permissions_of
from rota.auth.tokens import TokenRegistry

__all__ = ["Permission", "Principal", "Role", "TokenRegistry", "permissions_of"]
