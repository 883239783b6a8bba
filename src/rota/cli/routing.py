"""`rota queues unroutable`: waiting jobs that no live worker can run, and the
capabilities live workers advertise (rota.routing)."""

from __future__ import annotations

import click

from rota.cli.common import app_options, console, json_option, load_app, print_json, run_guarded
from rota.cli.table import Listing


@click.command("unroutable")
@app_options
@json_option
@click.option("--queue", help="Only this queue.")
def unroutable(
    app_path: str | None, database_url: str | None, as_json: bool, queue: str | None
) -> None:
    """Waiting jobs whose required labels no live worker of their queue advertises.
    Exits 3 when there are any, so a probe or a CI step can alert on them."""
    app = load_app(app_path, database_url)
    try:
        groups = run_guarded(lambda: app.routing.unroutable(queue))
        workers = run_guarded(app.routing.workers)
    finally:
        app.close()
    if as_json:
        print_json(
            {
                "unroutable": [g.to_json() for g in groups],
                "workers": [w.to_json() for w in workers],
            }
        )
    else:
        if groups:
            table = Listing("queue", "requires", "waiting", "oldest job", "waiting since")
            for g in groups:
                table.add_row(
                    g.queue,
                    ", ".join(g.requires),
                    str(g.waiting),
                    str(g.oldest_job_id),
                    g.oldest_created_at.isoformat(timespec="seconds"),
                )
            table.print()
        else:
            console.print("no unroutable jobs")
        caps = Listing("worker", "queues", "capabilities", "seen")
        for w in workers:
            caps.add_row(
                w.worker_id,
                ", ".join(w.queues),
                ", ".join(w.capabilities),
                w.seen_at.isoformat(timespec="seconds"),
            )
        if workers:
            caps.print()
        else:
            console.print("no live worker advertises capabilities")
    if groups:
        raise SystemExit(3)


def add_routing_commands(group: click.Group) -> None:
    """Attach the commands to `rota queues`."""
    group.add_command(unroutable)


def install(root: click.Group) -> None:
    """The routing feature's part of `rota queues`: unroutable."""
    queues = root.commands["queues"]
    assert isinstance(queues, click.Group)
    add_routing_commands(queues)
