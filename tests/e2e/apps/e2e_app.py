"""The app a worker subprocess loads with `--app e2e_app:app` (this folder on PYTHONPATH):
the test tasks on the database named by $ROTA_DATABASE_URL."""

from e2e_tasks import register

import rota

app = rota.App()
register(app)
