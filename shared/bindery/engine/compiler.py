"""Typst in a process of its own, so that every compile has a time limit.

A Typst compile is one call into native code that Python cannot interrupt, and a hostile book can make
one slow (a megabyte-long paragraph is a single line-breaking problem). So the build never calls Typst
itself: a child process holds one `typst.Compiler` (its fonts loaded once) and compiles piece after piece
on request, and the build waits for each answer only until its deadline. A compile that overruns is
ended by killing the child, and the build fails as `render_failed`; the worker is never left hanging.

The child is also where Typst's memory lives. Typst memoises across compiles and never lets go, so a
child that has grown past RESTART_BYTES (a fresh one that has set a few pages holds about 70 MiB; one
that has set a full run, three or four times that) is ended before it is sent a piece of more than
SMALL_SOURCE_BYTES, which a fresh child sets (some 40 ms to start: the interpreter, Typst's font search).
Every run is then set by a child in the same state, so a build's memory is one run's, however many runs
it has; a small piece (the front matter, a folio sheet) adds a few MiB to the child that set the last.
The child's peak (VmHWM) is read after each answer, so a benchmark can add it to the build's own.

One piece is asked for at a time (`send`, then `receive`): between the two, the build does its own work,
the next run's parse, on another core if there is one.

The protocol is a JSON line each way over the child's stdin and stdout.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESTART_BYTES = 100 * 1024 * 1024
# A child past RESTART_BYTES still sets a piece this small (the front matter, a run's folio sheet): what it
# adds to the child is a few MiB, where a fresh child costs some 40 ms to start, past its last answer.
SMALL_SOURCE_BYTES = 64 * 1024


class TimeLimit(Exception):
    """A compile did not finish in the time it was given."""


class CompileError(Exception):
    """Typst refused a piece (its message, first line)."""


class Compiler:
    """The parent's side: `compile` one piece at a time, each within `seconds`."""

    def __init__(self, root: Path, fonts: list[Path]):
        self.root, self.fonts = root, fonts
        self._child: subprocess.Popen[bytes] | None = None
        self._dying: list[subprocess.Popen[bytes] | None] = []  # killed, not yet reaped
        self._asked: tuple[str, float, float] | None = None  # the piece asked for: name, seconds, deadline
        self._spent = False  # the child holds more than RESTART_BYTES
        self.peak_rss = 0  # the most memory the child held, in bytes (VmHWM)

    def __enter__(self) -> Compiler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the child ahead of the first compile, so its start overlaps the build's own work."""
        self._started()

    def _started(self) -> subprocess.Popen[bytes]:
        if self._child is None:
            # This file, run as a script, not `-m bindery.engine.compiler`: that imports the bindery and
            # bindery.engine packages first, 22 ms of every child's start, for nothing the child uses
            # (it imports only typst). `-P` keeps this folder off its path (html.py is not the stdlib's).
            self._child = subprocess.Popen(
                [sys.executable, "-P", __file__, str(self.root), *map(str, self.fonts)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        return self._child

    def compile(
        self, source: Path, output: Path, *, standards: list[str], seconds: float, timestamp: int = 0
    ) -> list[str]:
        """Compile `source` (under the root) to `output`, dated `timestamp` (epoch seconds); return
        Typst's warnings."""
        self.send(source, output, standards=standards, seconds=seconds, timestamp=timestamp)
        return self.receive()

    def send(
        self, source: Path, output: Path, *, standards: list[str], seconds: float, timestamp: int = 0
    ) -> None:
        """Ask for `source` to be compiled, and return at once: `receive` waits for it, at most `seconds`
        from now. One piece is asked for at a time, so the build may do its own work meanwhile (parse the
        next run) on another core."""
        assert self._asked is None, "a piece is being compiled already"
        if self._spent and source.stat().st_size > SMALL_SOURCE_BYTES:
            # Killed, and reaped only at close: the kernel takes some 10 ms to drop a child that has set a
            # run, which this piece need not wait for.
            self._dying.append(self._kill())
        child = self._started()
        assert child.stdin is not None
        request = {
            "input": str(source),
            "output": str(output),
            "standards": standards,
            "timestamp": timestamp,
        }
        try:
            child.stdin.write(json.dumps(request).encode() + b"\n")
            child.stdin.flush()
        except BrokenPipeError:
            self.close()
            raise CompileError(f"the typesetter ended before it was sent {source.name}") from None
        self._asked = (source.name, seconds, time.monotonic() + seconds)

    def receive(self) -> list[str]:
        """Wait for the piece asked for last, until its deadline; return Typst's warnings."""
        assert self._asked is not None, "no piece was asked for"
        (name, seconds, deadline), self._asked = self._asked, None
        child = self._child
        if child is None or child.stdout is None:
            raise CompileError(f"the typesetter ended while compiling {name}")
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([child.stdout], [], [], max(0.0, left))
            if ready:
                break
            if left <= 0:
                self.close()
                raise TimeLimit(f"typesetting {name} took over {seconds:.0f} s")
        line = child.stdout.readline()
        if not line:
            self.close()
            raise CompileError(f"the typesetter ended while compiling {name}")
        self._spent = self._measure() > RESTART_BYTES
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise CompileError(answer["error"])
        warnings: list[str] = answer["warnings"]
        return warnings

    def _measure(self) -> int:
        """The child's resident memory now, in bytes; its peak so far is kept in `peak_rss`."""
        fields = {}
        if self._child is not None:
            try:
                with open(f"/proc/{self._child.pid}/status") as status:
                    fields = {
                        k: int(v.split()[0]) * 1024
                        for k, _, v in (ln.partition(":") for ln in status)
                        if k in ("VmHWM", "VmRSS")
                    }
            except OSError:
                pass
        self.peak_rss = max(self.peak_rss, fields.get("VmHWM", 0))
        return fields.get("VmRSS", 0)

    def close(self) -> None:
        """End the child. It is killed, not asked to exit: between compiles it holds nothing but Typst's
        memo, and an exit would spend the build's time freeing it object by object (32 ms a close here,
        after a run of the bench's 0.5 MB book; killed, the kernel drops it in 10)."""
        self._asked = None
        dying, self._dying = [self._kill(), *self._dying], []
        for child in filter(None, dying):
            child.wait()

    def _kill(self) -> subprocess.Popen[bytes] | None:
        child, self._child, self._spent = self._child, None, False
        if child is not None:
            child.kill()
            for stream in (child.stdin, child.stdout):
                if stream is not None:
                    stream.close()
        return child


def main(root: str, fonts: list[str]) -> None:
    """The child: compile each piece asked for, answer with its warnings or its error."""
    import typst

    compiler = typst.Compiler(root=root, font_paths=fonts, ignore_system_fonts=True)
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        request = json.loads(line)
        try:
            _, warnings = compiler.compile_with_warnings(
                request["input"],
                output=request["output"],
                format="pdf",
                pdf_standards=request["standards"],
                timestamp=request["timestamp"],  # the revision's: the same book makes the same bytes
            )
            answer: dict[str, Any] = {"warnings": [w.message for w in warnings]}
        except typst.TypstError as exc:
            answer = {"error": str(exc.message).splitlines()[0][:500] if exc.message else "typst failed"}
        out.write(json.dumps(answer).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    os.environ.pop("TYPST_FONT_PATHS", None)  # only the fonts the layer carries
    main(sys.argv[1], sys.argv[2:])
