"""Routing by required resources: tasks declare labels they need (`requires`), workers
advertise labels they have (`capabilities`); see docs/operations.md#routing."""
