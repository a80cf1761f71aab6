"""The generation-only HTTP proposer against a tiny fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from ttlab.discover.config import HTTPConfig
from ttlab.discover.llm.http_proposer import HTTPProposer
from ttlab.discover.puct import PUCTTree
from ttlab.discover.tasks import get_task

REPLY = "Here you go:\n```python\nimport numpy as np\ndef solve(parent, budget_s, seed):\n    return parent\n```\n"


class FakeServer:
    def __init__(self, fail_first: int = 0):
        self.requests: list[tuple[str, dict, dict]] = []
        self.fail_left = fail_first
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, body, dict(self.headers)))
                if outer.fail_left > 0:
                    outer.fail_left -= 1
                    self.send_response(503)
                    self.end_headers()
                    self.wfile.write(b"busy")
                    return
                if self.path.endswith("/chat/completions"):
                    n = len(body["messages"][0]["content"])
                    choice = {"message": {"role": "assistant", "content": REPLY + f"# prompt chars {n}\n"}}
                else:
                    choice = {"text": "echo:" + body["prompt"]}
                data = json.dumps({"choices": [choice], "usage": {"completion_tokens": 7}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_chat_completions_in_order_with_auth_header(monkeypatch):
    monkeypatch.setenv("TTLAB_TEST_KEY", "sekrit")
    with FakeServer() as srv:
        prop = HTTPProposer(HTTPConfig(base_url=srv.url, model="m", api_key_env="TTLAB_TEST_KEY", max_tokens=99))
        out = prop.complete(["a", "bbb", "cc"], seed=5)
    assert [c.text.splitlines()[-1] for c in out] == ["# prompt chars 1", "# prompt chars 3", "# prompt chars 2"]
    assert all(c.completion_tokens == 7 and not c.error for c in out)
    path, body, headers = srv.requests[0]
    assert path == "/v1/chat/completions" and body["model"] == "m" and body["max_tokens"] == 99
    assert headers["Authorization"] == "Bearer sekrit"
    assert sorted(b["seed"] for _, b, _ in srv.requests) == [5, 6, 7]


def test_transient_errors_are_retried_and_raw_completions_work():
    with FakeServer(fail_first=2) as srv:
        out = HTTPProposer(HTTPConfig(base_url=srv.url, chat=False, retries=3, concurrency=1)).complete(["hi"])
    assert out[0].text == "echo:hi" and out[0].error == ""
    assert len(srv.requests) == 3 and srv.requests[-1][0] == "/v1/completions"


def test_unreachable_server_gives_an_error_not_an_exception():
    out = HTTPProposer(HTTPConfig(base_url="http://127.0.0.1:9/v1", retries=0, timeout_s=2)).complete(["x"])
    assert out[0].text == "" and "cannot reach" in out[0].error


def test_propose_builds_prompts_from_states_and_extracts_code():
    task = get_task("erdos")
    tree = PUCTTree()
    for x in task.initial_states(np.random.default_rng(0), 2):
        r = task.verify(x)
        tree.add_root(r.construction, r.reward, r.score)
    states = tree.select(2)
    with FakeServer() as srv:
        props = HTTPProposer(HTTPConfig(base_url=srv.url), task=task).propose(states, 2)
    assert [p.state_id for p in props] == [states[0].id] * 2 + [states[1].id] * 2
    assert all(p.code.startswith("import numpy as np\ndef solve") for p in props)
    assert "Erdős" in srv.requests[0][1]["messages"][0]["content"]


def test_bad_base_url_is_a_clear_error():
    with pytest.raises(ValueError, match="--base-url"):
        HTTPProposer(HTTPConfig(base_url="127.0.0.1:8000"))


def test_search_with_http_proposer_end_to_end(tmp_path):
    """`ttlab discover search --proposer http`: the loop asks the server, runs the programs, grows the tree."""
    from ttlab.discover.loop import run_search
    from ttlab.discover.presets import search_debug

    with FakeServer() as srv:
        cfg = search_debug()
        cfg.root, cfg.run_name, cfg.proposer = str(tmp_path), "h", "http"
        cfg.http = HTTPConfig(base_url=srv.url, concurrency=2)
        rec = run_search(cfg, log=lambda *_: None)
        n_req = len(srv.requests)
    tree = json.loads((tmp_path / "discover" / "h" / "tree.json").read_text())
    assert n_req == rec["evals"] == tree["total"] == 4
    assert rec["valid"]  # the server's program returns the parent, which verifies
