"""Quickstart: define a task, enqueue a job, and run it in this process with rota.testing.

    python examples/quickstart.py

Jobs are stored in quickstart.db in the current directory. In an application the tasks live
in a module that your code and the workers import, and a worker process runs the jobs instead
of drain(): rota worker --app myshop.tasks:app --queues emails=4 (see docs/getting-started.md).
"""

import rota
from rota.testing import drain

app = rota.App("sqlite:///quickstart.db")


@app.task(queue="emails", max_attempts=5)
def send_welcome(email: str, name: str = "there") -> str:
    """Pretend to send a welcome mail; what a task returns is stored as the job's result."""
    return f"Hello {name}, welcome aboard! (sent to {email})"


app.migrate()  # create rota's tables; safe to run again
job = send_welcome.enqueue(email="ada@example.com", name="Ada")
print(f"enqueued job {job.id} ({job.state})")

try:
    send_welcome.enqueue(emial="bob@example.com")  # bad arguments are refused at the door
except rota.ArgumentsError as exc:
    print(f"refused: {exc}")

drain(app)  # run every waiting job here and now, as a test would
done = app.get_job(job.id)
assert done is not None
print(f"job {done.id} is {done.state}: {done.result}")
