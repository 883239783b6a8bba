"""The app a worker subprocess loads with `--app hardening_app:app`: its database URL
comes from the file named by $ROTA_DATABASE_URL_FILE, and each run of `effect` appends
its number to $HARDENING_EFFECTS (one line per run, so doubled runs show)."""

import os
import time

import rota

app = rota.App()


@app.task(name="effect", max_attempts=50)
def effect(ctx: rota.Context, n: int) -> int:
    time.sleep(0.05)
    ctx.progress(1.0, f"did {n}")
    with open(os.environ["HARDENING_EFFECTS"], "a", encoding="utf-8") as out:
        out.write(f"{n} {ctx.job.id} {ctx.attempt}\n")
    return n
