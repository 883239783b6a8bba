"""Maintenance services: small periodic loops that run only on the elected leader."""
