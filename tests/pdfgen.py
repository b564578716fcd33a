"""A minimal PDF writer for tests and benchmarks: pages of text lines and tables in Helvetica, with a
document information dictionary (title, author, creation date), and a correct cross-reference table.

A line is a string, or a list of cells written as a table row (each cell at its own column).
"""

from __future__ import annotations

from collections.abc import Sequence

Line = str | Sequence[str]


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _content(lines: Sequence[Line], column: int = 120) -> bytes:
    ops = ["BT", "/F1 10 Tf", "12 TL", "50 760 Td"]
    for line in lines:
        if isinstance(line, str):
            ops.append(f"({_escape(line)}) Tj T*")
            continue
        for cell in line:  # a table row: each cell moved right by `column` points
            ops.append(f"({_escape(cell)}) Tj {column} 0 Td")
        ops.append(f"{-column * len(line)} -12 Td")
    ops.append("ET")
    return "\n".join(ops).encode("cp1252", errors="replace")  # WinAnsiEncoding; other characters become "?"


def make_pdf(
    pages: Sequence[Sequence[Line]], *, title: str | None = None, author: str | None = None, created: str | None = None
) -> bytes:
    """The bytes of a PDF with one page per item of `pages`; `created` as a PDF date (`D:20200315`)."""
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled in below, once the page tree's number is known
    tree = add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    kids = []
    for lines in pages:
        stream = _content(lines)
        content = add(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        kids.append(
            add(
                b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (tree, content, font)
            )
        )
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % tree
    objects[tree - 1] = (
        b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % k for k in kids) + b"] /Count %d >>" % len(kids)
    )
    info_items = [(k, v) for k, v in (("Title", title), ("Author", author), ("CreationDate", created)) if v]
    info = add(
        b"<< " + b" ".join(f"/{k} ({_escape(v)})".encode("cp1252", errors="replace") for k, v in info_items) + b" >>"
    )
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R /Info %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        catalog,
        info,
        xref,
    )
    return bytes(out)
