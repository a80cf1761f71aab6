"""Test-time training step of TTT-Discover: PUCT -> generate -> sandbox -> verify -> entropic GRPO -> Adam.

One step:
1. choose `states_per_step` states with PUCT (lineage-blocking top-k);
2. build one prompt per state and sample `rollouts_per_state` completions each, in chunks of
   `gen_batch_size`; each chunk's programs go to the executor (local sandbox pool or Ray) as soon as they
   exist, so evaluation runs while the next chunk is generated;
   (a program that imports the Erdős building blocks, `--prompt-format blocks`, is sent with them bundled);
3. verify every returned construction with the task (the only source of scores), judge its provenance
   (`provenance.py`: a copy of a published reference, a `--known` construction or another lineage's state
   earns a failed sample's reward and never becomes a state), record expansions and new children in the
   tree (each with its program hash and parent);
4. advantages per group keyed by state id (`advantages.group_advantages`, entropic by default);
5. the learn phase (`learn.py`): the importance-sampled PG loss with the KL penalty folded in (`loss.py`),
   gradient accumulation over micro-batches, one Adam step (beta2 = 0.95) on the LoRA weights only;
6. flush the tree and checkpoint (adapter, optimizer, tree JSON, RNG) as `checkpoints/step_NNNNNN`, then
   point `checkpoints/LATEST` at it (atomic rename). A kill -9 anywhere loses at most the step in flight.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ttlab.common.checkpoint import (
    atomic_write_text,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from ttlab.common.device import resolve_device, seed_everything, torch_threads
from ttlab.common.logging import Logger, progress
from ttlab.common.runs import make_run_dir
from ttlab.discover.advantages import group_advantages, group_betas, group_betas_at_cap
from ttlab.discover.blocks import clock_wall_factor, with_blocks
from ttlab.discover.config import TrainConfig
from ttlab.discover.flags import check_train
from ttlab.discover.init_tree import load_verified_tree
from ttlab.discover.llm.generation import Generation
from ttlab.discover.llm.learn import learn
from ttlab.discover.llm.policy import LLMPolicy
from ttlab.discover.llm.ray_executor import make_executor
from ttlab.discover.llm.warmstart import warm_start
from ttlab.discover.prompts import ANSWER_PREFIXES, PROMPT_FORMATS, PromptState, extract_code
from ttlab.discover.provenance import Judge, Known, Provenance, program_hash
from ttlab.discover.puct import PUCTTree
from ttlab.discover.sandbox import Job, Limits, SandboxResult, batch_deadline_s, result_within
from ttlab.discover.starts import start_of
from ttlab.discover.tasks import get_task
from ttlab.discover.tasks.base import VerifyResult


def advantage_groups(state_ids: list[str], texts: list[str], mode: str = "state") -> list[str]:
    """The advantage group of each rollout: its state's id, or (`state_start`) its state's id and the start its
    program makes (`starts.start_of`), so a start is only ranked against programs that made the same one."""
    if mode == "state":
        return list(state_ids)
    return [f"{sid}|{start_of(t)}" for sid, t in zip(state_ids, texts, strict=True)]


class Trainer:
    """Owns the policy, optimizer, tree, executor and run directory; `step()` runs one TTT step."""

    def __init__(self, cfg: TrainConfig, policy: LLMPolicy | None = None, executor: Any = None, log=print):
        self.cfg, self.log = cfg, log
        check_train(cfg)  # every flag in range before a model is loaded or a run directory made
        self.build_prompt = PROMPT_FORMATS[cfg.prompt_format]
        self.answer_prefix = ANSWER_PREFIXES[cfg.prompt_format](get_task(cfg.task))
        self.task = get_task(cfg.task)
        self.judge = Judge(self.task, Known.for_task(self.task, cfg.known))
        self.device = resolve_device(cfg.device)
        if cfg.threads > 0:
            torch.set_num_threads(cfg.threads)
        seed_everything(cfg.seed)
        self.run = make_run_dir("discover", cfg, cfg.run_name, cfg.root, cfg.resume)
        self.policy = policy or LLMPolicy(cfg.policy, self.device, seed=cfg.seed, answer_prefix=self.answer_prefix)
        self.warm_info: dict[str, Any] = {}
        if cfg.warm_start and cfg.task == "erdos":
            self.warm_info = warm_start(self.policy, cfg.warm, log=log, prompt_format=cfg.prompt_format)
        elif cfg.warm_start:
            log(f"--warm-start: no program grammar for task {cfg.task!r}; starting from the plain model")
        if cfg.kl_ref == "init" and cfg.kl_coef > 0:
            self.policy.set_reference()  # pi_theta0: the adapter before any update (a resume reloads the warm start)
        self.opt = torch.optim.Adam(self.policy.trainable_parameters(), lr=cfg.lr,
                                    betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps)
        self.rng = np.random.default_rng(cfg.seed)
        self.step_idx = 0
        self._last_checkpoint_s = 0.0
        self.tree = self._new_tree()
        if cfg.resume and (self.run.checkpoints / "LATEST").exists():
            self.load()
            self._drop_metrics_after(self.step_idx)
        elif cfg.resume:
            log(f"--resume: no checkpoint in {self.run.checkpoints}, starting fresh")
        self.limits = Limits(wall_s=clock_wall_factor(cfg.program_clock) * cfg.program_budget_s + cfg.grace_s,
                             memory_mb=cfg.memory_mb)
        if executor is None:
            executor = make_executor(cfg.executor, cfg.workers, self.limits, cfg.ray_address, cfg.ray_cpus_per_task)
        self.executor = executor
        self.logger = Logger(self.run.path, wandb=cfg.wandb, config=cfg)

    def _new_tree(self) -> PUCTTree:
        if self.cfg.init_tree:
            return self._load_init_tree(Path(self.cfg.init_tree))
        tree = PUCTTree(self.cfg.puct_c, self.cfg.keep_children, self.cfg.max_roots)
        for x in self.task.initial_states(np.random.default_rng(self.cfg.seed), self.cfg.init_states):
            r = self.task.verify(x)
            if not r.valid:
                raise RuntimeError(f"task {self.task.name}: an initial state is invalid ({r.message})")
            tree.add_root(r.construction, r.reward, r.score)
        return tree

    def _load_init_tree(self, path: Path) -> PUCTTree:
        """`--init-tree`: an earlier run's tree; every node is re-verified and must match its stored reward."""
        return load_verified_tree(path, self.task, self.cfg.puct_c, self.cfg.keep_children, self.cfg.max_roots)

    # ---- one step ------------------------------------------------------------------------------
    def _prompt(self, node) -> str:
        parent = self.tree.nodes.get(node.parent_id) if node.parent_id else None
        st = PromptState(code=node.code, score=node.score, parent_score=parent.score if parent else None,
                         stdout=node.stdout)
        return self.build_prompt(self.task, st)

    def step(self) -> dict[str, float]:
        cfg = self.cfg
        t_start = time.perf_counter()
        states = self.tree.select(cfg.states_per_step)
        prompts, sids = [], []
        for s in states:
            p = self._prompt(s)
            prompts += [p] * cfg.rollouts_per_state
            sids += [s.id] * cfg.rollouts_per_state
        seeds = self.rng.integers(0, 2**31 - 1, size=len(prompts)).tolist()
        gens: list[Generation | None] = [None] * len(prompts)
        codes: list[str | None] = [None] * len(prompts)
        futs: list[Any] = [None] * len(prompts)
        t_gen = 0.0
        chunk = max(1, cfg.policy.gen_batch_size)

        def submit(j: int, g: Generation) -> None:
            """Completion j is done: its program starts in the sandbox (while the others are still sampled)."""
            code = extract_code(self.answer_prefix + g.text)
            gens[j], codes[j] = g, code
            parent = self.tree.nodes[sids[j]].array()
            # a program that imports the building blocks gets them bundled (the tree stores it unwrapped)
            futs[j] = None if code is None else self.executor.submit(
                Job(with_blocks(code, cfg.program_clock), parent, cfg.program_budget_s, seed=int(seeds[j])))

        for i in range(0, len(prompts), chunk):
            t0 = time.perf_counter()
            out = self.policy.generate(prompts[i:i + chunk], on_done=lambda k, g, i=i: submit(i + k, g))
            t_gen += time.perf_counter() - t0
            for k, g in enumerate(out):
                if gens[i + k] is None:  # a backend that does not stream
                    submit(i + k, g)
        t_gen_end = time.perf_counter()
        results: list[tuple[SandboxResult | None, VerifyResult]] = []
        deadline = time.monotonic() + batch_deadline_s(len(futs), cfg.workers, self.limits)
        for f in futs:
            if f is None:
                results.append((None, VerifyResult(False, float("nan"), 0.0, {}, "no python code block")))
                continue
            sr = result_within(f, deadline - time.monotonic())
            vr = (self.task.verify(sr.output, sr.reported_score) if sr.ok
                  else VerifyResult(False, float("nan"), 0.0, {}, f"{sr.status}: {sr.reason}"))
            results.append((sr, vr))
        provs: list[Provenance] = []
        for (sr, vr), sid, code in zip(results, sids, codes, strict=True):
            prov = (self.judge.judge(self.tree, sid, vr.construction, code or "") if vr.valid
                    else self.judge.failed(sid, code or ""))
            self.tree.record_expansion(sid)
            if prov.verdict == "new":
                self.tree.add_child(sid, vr.construction, vr.reward, vr.score, code or "", sr.stdout if sr else "",
                                    prov.program)
            elif prov.verdict == "same":
                self.tree.credit(sid, vr.reward)
            provs.append(prov)
        t_eval = time.perf_counter() - t_gen_end
        rewards = np.array([vr.reward if pr.counted else 0.0 for (_, vr), pr in zip(results, provs, strict=True)],
                           dtype=np.float64)
        valid = np.array([pr.counted for pr in provs], dtype=bool)  # a copy is a failed sample
        groups = advantage_groups(sids, [g.text for g in gens], cfg.adv_group)
        adv, keep = group_advantages(rewards, valid, groups, cfg.advantage, cfg.fail_mode)
        adv_raw_max = float(np.abs(adv).max()) if adv.size else 0.0
        if cfg.adv_clip > 0:  # optional; the estimator is bounded
            adv = np.clip(adv, -cfg.adv_clip, cfg.adv_clip)
        # the beta each kept group was solved for (on its scaled rewards, failures included)
        betas = group_betas(rewards, valid, groups, cfg.fail_mode) if cfg.advantage == "entropic" else []
        capped = group_betas_at_cap(rewards, valid, groups, cfg.fail_mode) if cfg.advantage == "entropic" else []
        t0 = time.perf_counter()
        with torch_threads(cfg.learn_threads if self.device.type == "cpu" else 0):
            lstats = {"learn/samples": 0} if cfg.frozen else learn(self.policy, self.opt, gens, adv, keep, cfg)
        if self.device.type == "cuda":
            torch.cuda.synchronize()  # timing boundary of the learn phase
        t_learn = time.perf_counter() - t0
        self.tree.flush()
        self.step_idx += 1
        gen_tokens = sum(g.completion_ids.numel() for g in gens)
        scores = [vr.score for (_, vr), pr in zip(results, provs, strict=True) if pr.counted]
        best_score = (max(scores) if self.task.higher_is_better else min(scores)) if scores else float("nan")
        m: dict[str, Any] = {
            "rollout/valid_rate": float(valid.mean()) if valid.size else 0.0,
            "rollout/reward_mean": float(rewards.mean()) if rewards.size else 0.0,
            "rollout/reward_best": float(rewards.max()) if rewards.size else 0.0,
            "rollout/score_best": best_score,
            "rollout/code_rate": float(np.mean([c is not None for c in codes])) if codes else 0.0,
            "rollout/run_rate": float(np.mean([sr is not None and sr.ok for sr, _ in results])) if results else 0.0,
            "rollout/copy_rate": float(np.mean([pr.verdict == "copy" for pr in provs])) if provs else 0.0,
            "adv/beta_mean": float(np.mean(betas)) if betas else float("nan"),
            "adv/beta_at_cap_frac": float(np.mean(capped)) if capped else float("nan"),
            "adv/kept_frac": float(keep.mean()) if keep.size else 0.0,
            "adv/abs_max_raw": adv_raw_max,
            "rollout/parse_rate": float(np.mean([c is not None for c in codes])) if codes else 0.0,
            "rollout/finished_rate": float(np.mean([g.finished for g in gens])) if gens else 0.0,
            "rollout/completion_tokens_mean": gen_tokens / max(1, len(gens)),
            "rollout/score_mean": float(np.mean(scores)) if scores else float("nan"),
            "tree/best_score": self._tree_best_score(),
            "perf/gen_tokens": gen_tokens,
            "perf/gen_tokens_per_s": gen_tokens / max(t_gen, 1e-9),
            "time/generate_s": t_gen, "time/evaluate_s": t_eval, "time/learn_s": t_learn,
            "tree/size": len(self.tree.nodes),
        }
        m.update(lstats)
        m = self.logger.scalars(m, self.step_idx)  # the step's one host sync
        if m.get("learn/samples", 0) > 0:
            m["perf/train_tokens_per_s"] = m["learn/tokens"] / max(t_learn, 1e-9)
        m["time/checkpoint_s"] = self._last_checkpoint_s  # the previous step's save (this one follows the log)
        m["time/step_s"] = time.perf_counter() - t_start
        m["step"] = self.step_idx
        # the metrics line goes first: a kill between the two leaves a line whose step is redone on --resume
        # (and its stale line dropped by load()), never a saved step without its line
        if cfg.log_samples:  # every rollout's text and verdict, for reading what the model writes
            with open(self.run.file("samples.jsonl"), "a") as f:
                for g, (_, vr), sid, code, pr in zip(gens, results, sids, codes, provs, strict=True):
                    f.write(json.dumps({"step": self.step_idx, "state": sid, "parsed": code is not None,
                                        "valid": vr.valid, "score": None if math.isnan(vr.score) else vr.score,
                                        "message": vr.message[:300], "tokens": int(g.completion_ids.numel()),
                                        **pr.record(), "text": g.text[:3000]}) + "\n")
        with open(self.run.file("metrics.jsonl"), "a") as f:
            f.write(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in m.items()}) + "\n")
        t0 = time.perf_counter()
        self.save()
        self._last_checkpoint_s = time.perf_counter() - t0
        return m

    def _tree_best_score(self) -> float:
        best = self.tree.best()
        return float(best.score) if best is not None else float("nan")

    # ---- checkpoints ---------------------------------------------------------------------------
    def _drop_metrics_after(self, step: int) -> None:
        """On resume: drop metrics/sample lines of steps after the checkpoint (logged, then killed before the save)."""
        for name in ("metrics.jsonl", "samples.jsonl"):
            self._drop_lines_after(self.run.file(name), step)

    @staticmethod
    def _drop_lines_after(path: Path, step: int) -> None:
        if not path.exists():
            return
        def kept(line: str) -> bool:
            try:
                return json.loads(line).get("step", 0) <= step
            except json.JSONDecodeError:  # a line torn by the kill
                return False

        lines = path.read_text().splitlines()
        keep = [x for x in lines if x.strip() and kept(x)]
        if len(keep) != len(lines):
            atomic_write_text(path, "".join(x + "\n" for x in keep))

    def save(self) -> Path:
        """`checkpoints/step_NNNNNN` (atomic pair), then `LATEST` -> it, then prune and export."""
        name = f"step_{self.step_idx:06d}"
        state = {"step": self.step_idx, "adapter": self.policy.adapter_state(), "optimizer": self.opt.state_dict(),
                 "rng": rng_state(), "np_rng": self.rng.bit_generator.state,
                 "tree": json.dumps(self.tree.to_json())}
        save_checkpoint(self.run.checkpoints / name, state)
        atomic_write_text(self.run.checkpoints / "LATEST", name + "\n")
        done = sorted(p.name.removesuffix(".json") for p in self.run.checkpoints.glob("step_*.json"))
        for old in done[:-max(1, self.cfg.keep_checkpoints)]:
            for suf in (".json", ".safetensors"):
                (self.run.checkpoints / (old + suf)).unlink(missing_ok=True)
        self.tree.save(self.run.file("tree.json"))  # human-readable copy; the checkpoint holds the truth
        best = self.tree.best()
        if best is not None:
            res = self.task.verify(best.array())  # re-verified, never the stored score
            atomic_write_text(self.run.file("best.json"), json.dumps(
                {"task": self.task.name, "valid": res.valid, "score": res.score, "message": res.message,
                 "node_id": best.id, "construction": best.array().tolist(), "code": best.code,
                 "provenance": {"program": best.program or program_hash(best.code), "parent": best.parent_id},
                 "step": self.step_idx}) + "\n")
        return self.run.checkpoints / name

    def load(self) -> None:
        name = (self.run.checkpoints / "LATEST").read_text().strip()
        state = load_checkpoint(self.run.checkpoints / name)
        self.policy.load_adapter_state(state["adapter"])
        self.opt.load_state_dict(state["optimizer"])
        self.tree = PUCTTree.from_json(json.loads(state["tree"]))
        self.rng.bit_generator.state = state["np_rng"]
        set_rng_state(state["rng"])
        self.step_idx = int(state["step"])
        self.log(f"resumed {self.run.checkpoints / name}: step {self.step_idx}, {len(self.tree.nodes)} states")

    def close(self) -> None:
        self.executor.close()
        self.logger.close()

    # ---- the run -------------------------------------------------------------------------------
    def run_steps(self) -> dict[str, float]:
        last: dict[str, float] = {}
        with progress(self.cfg.steps, "discover train") as bar:
            bar.set(completed=self.step_idx)
            while self.step_idx < self.cfg.steps:
                last = self.step()
                bar.advance()
                self.log(f"step {self.step_idx}: valid {last['rollout/valid_rate']:.2f}  "
                         f"reward best {last['rollout/reward_best']:.5g} mean {last['rollout/reward_mean']:.4g}  "
                         f"beta {last['adv/beta_mean']:.3g}  kl {last.get('learn/kl', float('nan')):.3g}  "
                         f"gen {last['perf/gen_tokens_per_s']:.0f} tok/s  "
                         f"t gen/eval/learn {last['time/generate_s']:.1f}/{last['time/evaluate_s']:.1f}/"
                         f"{last['time/learn_s']:.1f}s")
        return last


def train(cfg: TrainConfig, log=print) -> dict[str, float]:
    """Build a trainer, run to `cfg.steps`, close everything; returns the last step's metrics."""
    trainer = Trainer(cfg, log=log)
    try:
        return trainer.run_steps()
    finally:
        trainer.close()
