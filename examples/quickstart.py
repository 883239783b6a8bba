"""Quickstart: define a task, enqueue a job, and run it in this process with rota.testing.

    python examples/quickstart.py

Jobs are stored in quickstart.db in the current directory. In an application the tasks live
in a module that your code and the workers import, and a worker process runs the jobs instead
of drain(): rota worker --app myshop.tasks:app --queues emails=4 (see docs/getting-started.md).
"""

import threading

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

# Options apart, arguments typed: mypy checks these against send_welcome's signature.
later = send_welcome.options(delay=3600, key="welcome-bob").enqueue("bob@example.com", name="Bob")
print(f"job {later.id} runs in an hour ({later.state})")

try:
    send_welcome.enqueue(emial="bob@example.com")  # bad arguments are refused at the door
except rota.ArgumentsError as exc:
    print(f"refused: {exc}")

# A worker runs jobs; here a thread runs the waiting ones (drain), as a test would.
threading.Thread(target=drain, args=(app,)).start()
result = app.wait(job, timeout=30)  # the job's result, or its failure raised
print(f"job {job.id} is completed: {result}")
