"""An example for the --help of every `rota` command, kept in one place so that a test can
check each command has one (tests/unit/test_cli_help.py). Shown after the options."""

from __future__ import annotations

import click

EXAMPLES: dict[str, tuple[str, ...]] = {
    "migrate": (
        "rota migrate --database-url postgresql://rota@db/rota",
        "rota migrate --check --wait",
    ),
    "worker": (
        "rota worker --app myshop.tasks:app --queues default=10,mail=2",
        "rota worker --app myshop.tasks:app --queues hot=50 --quiet-queue hot --log-format json",
    ),
    "enqueue": ("rota enqueue --app myshop.tasks:app send_receipt --arg order=1817 --delay 30",),
    "jobs ls": ("rota jobs ls --state discarded --queue mail", "rota jobs ls | cut -f1,7"),
    "jobs show": ("rota jobs show 1817 --json",),
    "jobs retry": ("rota jobs retry 1817",),
    "jobs cancel": ("rota jobs cancel 1817",),
    "queues ls": ("rota queues ls", "rota queues ls --json"),
    "queues set": ("rota queues set mail --global-limit 5 --rate 100/60s",),
    "queues partitions": ("rota queues partitions --queue payments",),
    "queues pause": ("rota queues pause reports",),
    "queues purge": ('rota queues purge mail --reason "bad template" --dry-run',),
    "jobs cancel-many": (
        'rota jobs cancel-many --task shop.send_mail --reason "campaign stopped" --dry-run',
        'rota jobs cancel-many --queue mail --state running --reason "SMTP outage"',
    ),
    "jobs audit": ("rota jobs audit --action purge",),
    "queues resume": ("rota queues resume reports",),
    "queues window": ('rota queues window reports "Mon-Fri 01:00-05:00" --tz Europe/Berlin',),
    "queues breaker": ("rota queues breaker payments --threshold 0.5 --window 60",),
    "queues holds": ("rota queues holds payments",),
    "queues unroutable": ("rota queues unroutable --json",),
    "run": ("rota run --app myshop.tasks:app send_receipt --args '{\"order\": 1817}'",),
    "scale-hint": ("rota scale-hint --queue mail --concurrency 10",),
    "k8s render": (
        "rota k8s render --app myshop.tasks:app --image registry/shop:1.4 --queue mail",
    ),
    "k8s metrics-api": ("rota k8s metrics-api --port 8080",),
    "db roles": ("rota db roles --apply",),
    "db generate-key": ("rota db generate-key",),
    "db rotate-key": ("rota db rotate-key --batch 500",),
    "db copy": ("rota db copy --from sqlite:///rota.db --to postgresql://rota@db/rota",),
    "cron ls": ("rota cron ls",),
    "cron show": ("rota cron show nightly-report --next 3",),
    "cron history": ("rota cron history nightly-report --limit 10",),
    "cron trigger": ("rota cron trigger nightly-report",),
    "cron suspend": ("rota cron suspend nightly-report",),
    "cron resume": ("rota cron resume nightly-report",),
    "cron delete": ("rota cron delete nightly-report",),
    "cron next": ('rota cron next "30 2 * * *" --tz Europe/Berlin --count 3',),
    "batches ls": ("rota batches ls --open",),
    "batches show": ("rota batches show thumbnails",),
    "batches suspend": ("rota batches suspend thumbnails",),
    "batches resume": ("rota batches resume thumbnails",),
    "batches cancel": ("rota batches cancel thumbnails",),
    "batches scale": ("rota batches scale thumbnails 8",),
    "workflows ls": ("rota workflows ls --state failed",),
    "workflows show": ("rota workflows show nightly-2026-11-29 --no-jobs",),
    "workflows cancel": ("rota workflows cancel 42",),
    "workflows retry-step": ("rota workflows retry-step 42 process",),
    "sagas ls": ("rota sagas ls --status failed",),
    "sagas show": ("rota sagas show order-1817",),
    "sagas retry": ("rota sagas retry order-1817",),
    "sagas abort": ('rota sagas abort order-1817 --reason "customer cancelled"',),
    "events ls": ("rota events ls --name order.paid --limit 20",),
    "events subscriptions": ("rota events subscriptions",),
    "events replay": ("rota events replay --name order.paid --after 1200",),
    "dlq ls": ("rota dlq ls --queue payments --since 2h", "rota dlq ls --wide"),
    "dlq show": ("rota dlq show 1817",),
    "dlq replay": (
        "rota dlq replay --error-type TimeoutError --since 2h --dry-run",
        'rota dlq replay --id 1817 --id 1807 --reason "gateway fixed"',
    ),
    "dlq dismiss": ('rota dlq dismiss 1817 --reason "refunded by hand"',),
    "dlq replays": ("rota dlq replays --limit 5",),
    "tenants ls": ("rota tenants ls",),
    "tenants set": ("rota tenants set acme --max-running 20",),
    "tenants fair": ("rota tenants fair reports",),
    "tokens create": ("rota tokens create ci-deploy --role operator --expires 30d",),
    "tokens ls": ("rota tokens ls --all",),
    "tokens revoke": ("rota tokens revoke ci-deploy",),
    "metrics": ("rota metrics --port 9090",),
    "dashboard": ("rota dashboard --port 8000",),
    "dashboard login-url": ("rota dashboard login-url --token-name alice --expires 10m",),
}


def commands(
    group: click.Group, prefix: str = "", *, load: bool = True
) -> dict[str, click.Command]:
    """Every command under `group` by its path ("dlq replay"), groups included. With
    `load`, commands a group loads on first use (rota.cli.main.LazyGroup) are loaded;
    without it only those already loaded are walked."""
    found: dict[str, click.Command] = {}
    ctx = click.Context(group)
    names = group.list_commands(ctx) if load else list(group.commands)
    for name in names:
        command = group.get_command(ctx, name) if load else group.commands[name]
        if command is None:
            continue
        path = f"{prefix}{name}"
        found[path] = command
        if isinstance(command, click.Group):
            found.update(commands(command, path + " ", load=load))
    return found


def attach(root: click.Command, prefix: str = "") -> None:
    """Put each command's example in its --help, after the options (`root` and what is
    under it; `prefix` is root's own path when it is not the top)."""
    tree = {prefix.strip(): root} if prefix else {}
    if isinstance(root, click.Group):
        tree.update(commands(root, prefix, load=False))
    for path, command in tree.items():
        lines = EXAMPLES.get(path)
        if lines:
            # \b: click keeps these lines as they are instead of rewrapping them.
            label = "Example" if len(lines) == 1 else "Examples"
            command.epilog = f"\b\n{label}:\n" + "\n".join(f"  {line}" for line in lines)
