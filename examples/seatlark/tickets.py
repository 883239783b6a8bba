"""The ticket PDF: one A4-wide stub with the show, the holder and a QR code that encodes the
ticket's code. fpdf2 draws the page and segno computes the QR matrix; both are pure Python."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import segno
from fpdf import FPDF

# The stub is 210 x 99 mm: a third of an A4 sheet, the usual size of a printed ticket.
PAGE = (210.0, 99.0)
QR_MODULE_MM = 1.4
CHECK_URL = "https://seatlark.example/t/{code}"


@dataclass(frozen=True)
class TicketFace:
    """What is printed on a ticket."""

    code: str
    order_id: int
    holder: str
    show: str
    seats: int


def render(face: TicketFace, directory: Path) -> Path:
    """Write `face` as `directory/CODE.pdf` and return the path.

    The file appears atomically (written aside, then renamed), and the same code always
    gives the same file name: a job that runs again after a crash overwrites its own
    ticket instead of leaving a second one beside it."""
    directory.mkdir(parents=True, exist_ok=True)
    pdf = FPDF(format=PAGE)
    pdf.set_auto_page_break(False)
    pdf.set_title(f"Seatlark ticket {face.code}")
    pdf.add_page()

    pdf.set_draw_color(40, 40, 40)
    pdf.rect(5, 5, PAGE[0] - 10, PAGE[1] - 10)
    pdf.set_font("Helvetica", "B", 24)
    pdf.text(14, 24, "Seatlark")
    pdf.set_font("Helvetica", "B", 15)
    pdf.text(14, 40, _latin1(face.show))
    pdf.set_font("Helvetica", "", 11)
    pdf.text(14, 52, _latin1(f"Holder: {face.holder}"))
    pdf.text(14, 60, f"Admits: {face.seats}")
    pdf.text(14, 68, f"Order: {face.order_id}")
    pdf.set_font("Courier", "B", 13)
    pdf.text(14, 84, face.code)

    qr = segno.make(CHECK_URL.format(code=face.code), error="m")
    matrix = qr.matrix
    side = len(matrix) * QR_MODULE_MM
    left, top = PAGE[0] - 14 - side, (PAGE[1] - side) / 2
    pdf.set_fill_color(0, 0, 0)
    for y, row in enumerate(matrix):
        # One rectangle per run of dark modules keeps the file small.
        x = 0
        while x < len(row):
            if not row[x]:
                x += 1
                continue
            start = x
            while x < len(row) and row[x]:
                x += 1
            pdf.rect(
                left + start * QR_MODULE_MM,
                top + y * QR_MODULE_MM,
                (x - start) * QR_MODULE_MM,
                QR_MODULE_MM,
                style="F",
            )

    path = directory / f"{face.code}.pdf"
    aside = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pdf.output(str(aside))
    aside.replace(path)
    return path


def _latin1(text: str) -> str:
    """The core PDF fonts speak Latin-1: replace what they cannot draw."""
    return text.encode("latin-1", "replace").decode("latin-1")
