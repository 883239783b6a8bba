"""The HTTP JSON API and the web dashboard (`rota dashboard`). Importing this package is
cheap: the Starlette app is built by `rota.web.server.create_app`."""
