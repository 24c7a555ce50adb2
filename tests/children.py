"""A child process whose stdout a test reads line by line while it runs."""
from __future__ import annotations

import subprocess
import tempfile
from typing import IO, Iterator, Sequence


class StreamedChild:
    """``Popen`` of ``args`` with stdout as a pipe to read as it comes and stderr kept in a file.

    stderr is read only once the child is done, so it must not be a pipe: a
    child that writes more than the pipe holds (64 KiB on Linux) before then,
    such as a service logging a warning per redelivered message, would block
    in that write for good while the test waits for its stdout.
    """

    def __init__(self, args: Sequence[str], **popen: object) -> None:
        self._errors: IO[str] = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        self.process = subprocess.Popen(list(args), stdout=subprocess.PIPE, stderr=self._errors, text=True,
                                        **popen)  # type: ignore[call-overload]

    def lines(self) -> Iterator[str]:
        """The child's stdout, line by line, until it closes it."""
        assert self.process.stdout is not None
        yield from self.process.stdout

    def stderr_tail(self, chars: int) -> str:
        """The last ``chars`` characters the child wrote to stderr so far."""
        self._errors.flush()
        self._errors.seek(0)
        return self._errors.read()[-chars:]

    def close(self) -> None:
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._errors.close()
