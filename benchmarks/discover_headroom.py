"""Headroom of the frozen warm-started SmolLM2 on Erdős: parse / valid rate per sampling temperature and prompt.

Where can TTT improve on the frozen model? This samples the `cpu_smollm2` warm-started model (frozen) at
several temperatures on two kinds of prompt: a tree ROOT (the identity program shown: the model writes a
whole program) and PARENT states (a valid program the model itself wrote at T = 0.5 from a root, as PUCT
picks from step 2 on). Every completion is sandboxed (2 s budget) and verified, as in training. Prints
ONE JSON line last (and writes it with --out).

    python benchmarks/discover_headroom.py [--temps 0.5,0.7,1.0] [--rollouts 8] [--parents 2] [--seed 0]

Same-prompt comparison of a TTT run's adapter with the frozen warm start: `--tree` takes the parent states
from a tree.json (its best `--parents` non-root states, e.g. the shared bootstrap tree both arms of
`discover_ttt.py` start from) and `--adapter` loads a trainer checkpoint's LoRA weights (e.g.
runs/discover/ttt_trained_TAG/checkpoints/step_000010) instead of the warm start; the sampling seeds are
the same whatever the adapter, so two runs differ only in the weights.

    python benchmarks/discover_headroom.py --tree T.json --temps 0.85 --rollouts 16 --parents 3 [--adapter CKPT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sample(tr, prompt_state, parent_x, n: int, temperature: float, seed: int) -> list[dict]:
    """`n` rollouts of one prompt at `temperature`: [{parsed, valid, score, code, tokens}]."""
    import numpy as np

    from ttlab.discover.prompts import extract_code
    from ttlab.discover.sandbox import Job, batch_deadline_s, result_within

    tr.policy.cfg.temperature = temperature
    gens = tr.policy.generate([tr.build_prompt(tr.task, prompt_state)] * n)
    rng = np.random.default_rng(seed)
    codes = [extract_code(tr.answer_prefix + g.text) for g in gens]
    futs = [None if c is None else tr.executor.submit(Job(c, parent_x, tr.cfg.program_budget_s,
                                                          seed=int(rng.integers(2**31 - 1)))) for c in codes]
    deadline = time.monotonic() + batch_deadline_s(len(futs), tr.cfg.workers, tr.limits)
    out = []
    for g, c, f in zip(gens, codes, futs, strict=True):
        row = {"parsed": c is not None, "valid": False, "score": None, "code": c, "tokens": int(g.completion_ids.numel()),
               "message": "no python code block"}
        if f is not None:
            sr = result_within(f, deadline - time.monotonic())
            if sr.ok:
                vr = tr.task.verify(sr.output, sr.reported_score)
                row.update(valid=bool(vr.valid), score=float(vr.score) if vr.valid else None, message=vr.message[:200],
                           output=sr.output if vr.valid else None)
            else:
                row["message"] = f"{sr.status}: {sr.reason}"[:200]
        out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--temps", default="0.5,0.7,1.0")
    ap.add_argument("--rollouts", type=int, default=8)
    ap.add_argument("--parents", type=int, default=2, help="parent states (model-written valid programs)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="")
    ap.add_argument("--tree", default="", help="parents: the best --parents non-root states of this tree.json")
    ap.add_argument("--adapter", default="", help="a trainer checkpoint whose LoRA weights replace the warm start")
    args = ap.parse_args()
    import numpy as np
    import torch

    from ttlab.discover.llm.presets import cpu_smollm2
    from ttlab.discover.llm.trainer import Trainer
    from ttlab.discover.prompts import PromptState

    t0, load0 = time.time(), os.getloadavg()
    cfg = cpu_smollm2()
    cfg.frozen, cfg.seed, cfg.root, cfg.run_name = True, args.seed, str(ROOT / "runs"), f"headroom_{time.strftime('%H%M%S')}_{os.getpid()}"
    tr = Trainer(cfg, log=lambda s: print(s, flush=True))
    torch.manual_seed(args.seed)
    root = tr.tree.nodes[next(iter(tr.tree.nodes))]
    root_x = root.array()
    temps = [float(t) for t in args.temps.split(",")]
    res: dict = {"benchmark": "discover_headroom", "rollouts": args.rollouts, "root": {}, "parent": {},
                 "tree": args.tree, "adapter": args.adapter}
    if args.adapter:
        from ttlab.common.checkpoint import load_checkpoint

        tr.policy.load_adapter_state(load_checkpoint(args.adapter)["adapter"])
        print(f"adapter: {args.adapter}", flush=True)
    if args.tree:
        from ttlab.discover.puct import PUCTTree

        tree = PUCTTree.load(args.tree)
        kids = sorted([n for n in tree.nodes.values() if n.parent_id], key=lambda n: -n.reward)[: args.parents]
        if not kids:
            raise SystemExit(f"--tree {args.tree}: no non-root states")
        parents = []
        for n in kids:
            v = tr.task.verify(n.array())
            if not v.valid:
                raise SystemExit(f"--tree {args.tree}: state {n.id} does not verify ({v.message})")
            parents.append({"code": n.code, "score": float(v.score), "output": n.array().tolist(), "id": n.id})
    else:
        # parents: valid programs the frozen model writes from the root at T = 0.5 (what PUCT expands from step 2)
        base = sample(tr, PromptState(code="", score=root.score), root_x, args.rollouts, 0.5, args.seed)
        res["root"]["0.5"] = [{k: r[k] for k in ("parsed", "valid", "score", "message")} for r in base]
        parents = sorted([r for r in base if r["valid"]], key=lambda r: r["score"])[: args.parents]
        print(f"root T=0.5: valid {sum(r['valid'] for r in base)}/{len(base)}", flush=True)
    for t in temps:
        if not args.tree and str(t) not in res["root"]:
            rows = sample(tr, PromptState(code="", score=root.score), root_x, args.rollouts, t, args.seed + 1)
            res["root"][str(t)] = [{k: r[k] for k in ("parsed", "valid", "score", "message")} for r in rows]
            print(f"root T={t}: valid {sum(r['valid'] for r in rows)}/{len(rows)}", flush=True)
        for p, par in enumerate(parents):
            torch.manual_seed(args.seed + 100 * p)  # the same sampling noise whatever the adapter
            rows = sample(tr, PromptState(code=par["code"], score=par["score"], parent_score=root.score),
                          np.asarray(par["output"], dtype=float), args.rollouts, t, args.seed + 2 + p)
            res["parent"].setdefault(str(t), []).append(
                {"parent_score": par["score"], "rows": [{k: r[k] for k in ("parsed", "valid", "score", "message")}
                                                        for r in rows]})
            print(f"parent {p} T={t}: valid {sum(r['valid'] for r in rows)}/{len(rows)} "
                  f"({[r['message'][:60] for r in rows if not r['valid']]})", flush=True)
    tr.close()

    def rate(rows, key):
        return round(float(np.mean([r[key] for r in rows])), 3) if rows else None

    res["summary"] = {t: {"root_valid": rate(res["root"].get(t, []), "valid"),
                          "parent_valid": rate([r for g in res["parent"].get(t, []) for r in g["rows"]], "valid"),
                          "parent_parse": rate([r for g in res["parent"].get(t, []) for r in g["rows"]], "parsed")}
                      for t in [str(x) for x in temps]}
    res.update(commit=subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip(),
               nproc=os.cpu_count(), loadavg_start=load0, loadavg_end=os.getloadavg(), wall_s=round(time.time() - t0, 1))
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))
    print(json.dumps({k: res[k] for k in ("benchmark", "summary", "wall_s", "loadavg_start", "loadavg_end", "commit")}))


if __name__ == "__main__":
    main()
