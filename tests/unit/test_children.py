"""The test helper that streams a child's stdout does not hang on a child that writes much to stderr."""
from __future__ import annotations

import sys
import threading

from children import StreamedChild

#: Four times what a Linux pipe holds, written before the child's only line of stdout.
NOISE = 4 * 65536

CHILD = (f"import sys; sys.stderr.write('w' * {NOISE} + 'last words'); sys.stderr.flush(); "
         "print('{\"check\": \"done\"}', flush=True)")


def test_a_child_that_fills_more_than_a_pipe_on_stderr_still_reaches_its_stdout():
    child = StreamedChild([sys.executable, "-c", CHILD])
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(child.lines()), daemon=True)
    try:
        reader.start()
        reader.join(60)
        # with stderr on a pipe nobody reads yet, the child blocks in its write and never prints
        assert not reader.is_alive(), "the child's stdout never came: it is blocked writing stderr"
        assert child.process.wait(30) == 0
        assert lines == ['{"check": "done"}\n']
        tail = child.stderr_tail(20)
        assert tail.endswith("last words") and len(tail) == 20
    finally:
        if child.process.poll() is None:
            child.process.kill()
            child.process.wait()
        child.close()
