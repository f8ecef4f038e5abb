"""A code-interpreter client in plain Python (standard library only):
upload a file, run code on it, read the file the code wrote back."""

import base64
import json
import os
import urllib.request

SANDBOX = os.environ.get("SANDBOX", "http://127.0.0.1:3001")
SESSION = f"{SANDBOX}/v1/sessions/py-client"


def call(method, url, body=None, content_type="application/json"):
    data = json.dumps(body).encode() if content_type == "application/json" and body is not None else body
    request = urllib.request.Request(url, data=data, method=method, headers={"content-type": content_type})
    with urllib.request.urlopen(request) as answer:
        return json.load(answer)


uploaded = call("PUT", f"{SESSION}/files/words.txt", b"the quick brown fox jumps over the lazy dog", "text/plain")
assert uploaded["size_bytes"] == 43, uploaded

code = """
from collections import Counter
words = open("words.txt").read().split()
with open("counts.json", "w") as out:
    json.dump(Counter(len(w) for w in words), out)
print(len(words))
"""
report = call("POST", f"{SESSION}/run", {"code": "import json\n" + code})
assert report["exit_code"] == 0 and report["stdout"] == "9\n", report
assert [a["filename"] for a in report["artifacts"]] == ["counts.json"], report

artifact = call("GET", f"{SESSION}/artifacts/counts.json")
counts = json.loads(base64.b64decode(artifact["content_base64"]))
assert counts == {"3": 4, "5": 3, "4": 2}, counts
print("word lengths:", counts)

assert call("DELETE", SESSION)["status"] == "closed"
