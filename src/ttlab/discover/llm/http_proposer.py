"""Generation-only proposer over an OpenAI-compatible HTTP endpoint (search without training).

Any local server that speaks the OpenAI API (vLLM `serve`, llama.cpp `server`, SGLang, Ollama's `/v1`)
works: `POST {base_url}/chat/completions` with one user message per prompt (or `/completions` with the
raw prompt when `chat=False`). Requests run concurrently on a small thread pool (the work is waiting on
sockets), transient failures (connection errors, 429, 5xx) are retried with exponential backoff, and a
failed request yields an empty completion with its error instead of sinking the whole batch. The API key,
when the server wants one, is read from the environment variable named by `api_key_env`, never from a
flag or a file.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ttlab.discover.config import HTTPConfig
from ttlab.discover.prompts import PromptState, build_prompt, extract_code
from ttlab.discover.proposers import Proposal, Proposer
from ttlab.discover.puct import Node
from ttlab.discover.tasks.base import Task


@dataclass
class Completion:
    text: str
    error: str = ""
    completion_tokens: int = 0


class HTTPProposer(Proposer):
    """A `Proposer` (for `loop.run_search(cfg, proposer=...)`); `complete(prompts)` is the raw client."""

    def __init__(self, cfg: HTTPConfig, task: Task | None = None, seed: int | None = None):
        if not cfg.base_url.startswith(("http://", "https://")):
            raise ValueError(f"--base-url {cfg.base_url!r}: must start with http:// or https://")
        self.cfg, self.task, self.seed = cfg, task, seed
        self.calls = 0

    def _request(self, prompt: str, seed: int | None) -> Completion:
        cfg = self.cfg
        body: dict = {"model": cfg.model, "temperature": cfg.temperature, "top_p": cfg.top_p,
                      "max_tokens": cfg.max_tokens}
        if seed is not None:
            body["seed"] = seed
        if cfg.chat:
            url = cfg.base_url.rstrip("/") + "/chat/completions"
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            url = cfg.base_url.rstrip("/") + "/completions"
            body["prompt"] = prompt
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(cfg.api_key_env, "")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(body).encode()
        err = ""
        for attempt in range(cfg.retries + 1):
            if attempt:
                time.sleep(min(30.0, 0.5 * 2 ** (attempt - 1)))
            req = urllib.request.Request(url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=cfg.timeout_s) as resp:
                    payload = json.loads(resp.read().decode("utf-8", errors="replace"))
                return self._parse(payload)
            except urllib.error.HTTPError as e:
                detail = e.read()[:300].decode("utf-8", errors="replace")
                err = f"HTTP {e.code} from {url}: {detail}"
                if e.code != 429 and e.code < 500:
                    break  # a client error will not fix itself
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                err = f"cannot reach {url}: {e}"
            except (json.JSONDecodeError, KeyError, IndexError, TypeError) as e:
                err = f"malformed response from {url}: {type(e).__name__}: {e}"
                break
        return Completion("", error=err)

    def _parse(self, payload: dict) -> Completion:
        choice = payload["choices"][0]
        text = choice["message"]["content"] if self.cfg.chat else choice["text"]
        usage = payload.get("usage") or {}
        return Completion(text or "", completion_tokens=int(usage.get("completion_tokens", 0) or 0))

    def complete(self, prompts: list[str], seed: int | None = None) -> list[Completion]:
        seeds = [None if seed is None else seed + i for i in range(len(prompts))]
        with ThreadPoolExecutor(max_workers=max(1, self.cfg.concurrency)) as ex:
            return list(ex.map(self._request, prompts, seeds))

    def propose(self, states: list[Node], n: int) -> list[Proposal]:
        """`n` programs per state: prompt from the state, completion from the server, last python block.

        A reply without a usable code block (or a failed request) becomes an empty program, which the
        sandbox reports as failed, so the expansion still counts in the tree.
        """
        if self.task is None:
            raise ValueError("HTTPProposer.propose needs the task (HTTPProposer(cfg, task=...))")
        prompts, ids = [], []
        for s in states:
            prompt = build_prompt(self.task, PromptState(code=s.code, score=s.score, stdout=s.stdout))
            prompts += [prompt] * n
            ids += [s.id] * n
        seed = None if self.seed is None else self.seed + 100_003 * self.calls
        self.calls += 1
        out = []
        for sid, c in zip(ids, self.complete(prompts, seed), strict=True):
            code = extract_code(c.text)
            out.append(Proposal(sid, code or "", {"text": c.text, "error": c.error, "tokens": c.completion_tokens,
                                                  "no_code": code is None}))
        return out
