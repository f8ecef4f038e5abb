"""stdout/stderr replacements that keep at most a fixed number of bytes."""


class CappedStream:
    """A write-only text stream that drops what goes past `limit` bytes."""

    def __init__(self, limit):
        self._limit = limit
        self._parts = []
        self._size = 0
        self.truncated = False

    def write(self, text):
        text = str(text)
        if self.truncated:
            return len(text)
        data = text.encode("utf-8", "replace")
        room = self._limit - self._size
        if len(data) > room:
            data = data[:room]
            self.truncated = True
        self._parts.append(data)
        self._size += len(data)
        return len(text)

    def flush(self):
        pass

    def getvalue(self):
        return b"".join(self._parts).decode("utf-8", "replace")
