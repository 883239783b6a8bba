"""Production hardening: encrypted task arguments, database URLs from secret files,
redaction of secrets, and least-privilege PostgreSQL roles (docs/security.md)."""
