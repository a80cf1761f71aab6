"""The whole search loop fed only hostile programs: it finishes, records every one as a failure (or a
valid construction recomputed by the verifier), and no secret reaches tree.json / best.json, which the
next LLM prompt is built from."""

import json
import os
import uuid

from ttlab.discover.config import SearchConfig
from ttlab.discover.loop import run_search
from ttlab.discover.proposers import Proposal, Proposer

SECRET = "ttlab-loop-secret-" + uuid.uuid4().hex

HOSTILE = [
    # links in place of every output name, pointing at the parent's environment
    "import os\nfor n in ['stdout.txt', 'stderr.txt', 'result.npy', 'error.json', 'reported.json']:\n"
    "    os.symlink('/proc/%d/environ' % PARENT, n)\n"
    "def solve(p, b, s):\n    return p\n",
    # FIFOs, then a clean exit without a result
    "import os\nfor n in ['stdout.txt', 'result.npy']:\n    os.mkfifo(n)\nos._exit(0)\n",
    # a header bomb written straight into the result channel
    "import os, struct\nh = \"{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }\"\n"
    "h = h + ' ' * (117 - len(h)) + '\\n'\n"
    "os.pwrite(4, b'\\x93NUMPY\\x01\\x00' + struct.pack('<H', len(h)) + h.encode(), 0)\nos._exit(0)\n",
    # the seed's contract, claiming a record it does not have
    "import numpy as np\ndef run(seed, budget_s):\n    return np.full(20, 0.5), 0.1, 20\n",
    # too many pieces for the verifier
    "import numpy as np\ndef solve(p, b, s):\n    return np.full(200_000, 0.5)\n",
]


class HostileProposer(Proposer):
    def __init__(self) -> None:
        self.i = 0

    def propose(self, states, n):
        out = []
        for s in states:
            for _ in range(n):
                code = HOSTILE[self.i % len(HOSTILE)].replace("PARENT", str(os.getpid()))
                out.append(Proposal(s.id, code))
                self.i += 1
        return out


def test_search_survives_hostile_programs_and_leaks_nothing(tmp_path):
    os.environ["TTLAB_LOOP_SECRET"] = SECRET
    cfg = SearchConfig(time_limit="60s", program_budget_s=1.0, grace_s=3.0, init_states=2, states_per_step=1,
                       samples_per_state=5, max_steps=1, workers=2, memory_mb=1536, root=str(tmp_path), run_name="h")
    try:
        rec = run_search(cfg, proposer=HostileProposer(), log=lambda *_: None)
    finally:
        del os.environ["TTLAB_LOOP_SECRET"]
    run = tmp_path / "discover" / "h"
    text = (run / "tree.json").read_text() + (run / "best.json").read_text()
    assert SECRET not in text
    tree = json.loads((run / "tree.json").read_text())
    assert rec["evals"] == 5 and tree["total"] == 5
    assert 0.38 < rec["score"] <= 0.5 + 1e-12  # the run() claim of 0.1 was recomputed, never taken
