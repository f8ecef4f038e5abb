"""stdout/stderr replacements that keep at most a fixed number of bytes."""


class CappedStream:
    """A write-only text stream that drops what goes past `limit` bytes."""

    def __init__(self, limit, live=None, name=None):
        self._limit = limit
        self._parts = []
        self._size = 0
        self.truncated = False
        # When the run streams, what is kept is also sent to the host as it
        # is written (`rich_output.LiveChannel`), under `name`.
        self._live = live
        self._name = name

    def write(self, text):
        text = str(text)
        if self.truncated:
            return len(text)
        data = text.encode("utf-8", "replace")
        room = self._limit - self._size
        if len(data) > room:
            # Cut on a character boundary: what was sent live and what is
            # reported at the end are the same text.
            data = data[:room].decode("utf-8", "ignore").encode("utf-8")
            self.truncated = True
        if not data:
            return len(text)
        self._parts.append(data)
        self._size += len(data)
        if self._live is not None:
            self._live.send(self._name, data.decode("utf-8"))
        return len(text)

    def flush(self):
        pass

    def getvalue(self):
        return b"".join(self._parts).decode("utf-8", "replace")
