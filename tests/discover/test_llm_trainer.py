"""The TTT step on CPU: tiny random LM, real sandbox pool, real Erdős verifier.

A random model never writes a python block, so these tests replace the code extractor with one that maps
each completion to a real program (a few different, deterministic edits of the parent, one crashing): the
rewards then differ within a group and the learn phase runs for real.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from ttlab.common.checkpoint import load_checkpoint
from ttlab.common.data import shared_data_file
from ttlab.discover.advantages import group_advantages
from ttlab.discover.llm import trainer as trainer_mod
from ttlab.discover.llm.presets import debug
from ttlab.discover.llm.tiny import make_tiny_model
from ttlab.discover.llm.trainer import Trainer

PROG = ("import numpy as np\n"
        "def solve(parent, budget_s, seed):\n"
        "    h = np.array(parent, dtype=float)\n"
        "    h[: {k}] *= 0.9\n"
        "    return np.clip(h, 0, 1)\n")
CRASH = "def solve(parent, budget_s, seed):\n    raise RuntimeError('boom')\n"


def fake_extract(text):
    k = len(text.encode("utf-8", "replace"))
    return CRASH if k % 7 == 0 else PROG.format(k=1 + 5 * (k % 6))


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def patched(monkeypatch):
    monkeypatch.setattr(trainer_mod, "extract_code", fake_extract)


def cfg_for(tiny_dir, root, name, **kw):
    cfg = debug()
    cfg.policy.model, cfg.root, cfg.run_name = str(tiny_dir), str(root), name
    cfg.states_per_step, cfg.rollouts_per_state, cfg.policy.max_new_tokens = 2, 4, 16
    for k, v in kw.items():
        setattr(cfg, k, v)
    return cfg


def test_one_step_changes_only_lora_weights_with_zero_kl_and_unit_ratio(tiny_dir, tmp_path, patched):
    tr = Trainer(cfg_for(tiny_dir, tmp_path, "a"), log=lambda *_: None)
    try:
        before = {n: p.detach().clone() for n, p in tr.policy.model.named_parameters()}
        m = tr.step()
    finally:
        tr.close()
    assert m["rollout/valid_rate"] > 0 and m["learn/samples"] > 0
    assert m["learn/kl"] == pytest.approx(0.0, abs=1e-7)  # adapter starts as the base model
    assert m["learn/ratio_mean"] == pytest.approx(1.0, abs=1e-4)  # on-policy
    changed = {n for n, p in tr.policy.model.named_parameters() if not torch.equal(p, before[n])}
    assert changed and all("lora_" in n for n in changed)
    assert any("lora_B" in n for n in changed)
    for k in ("time/generate_s", "time/evaluate_s", "time/learn_s", "perf/gen_tokens_per_s",
              "perf/train_tokens_per_s", "adv/beta_mean", "rollout/reward_best"):
        assert k in m


def test_advantages_are_grouped_by_the_state_each_sample_came_from(tiny_dir, tmp_path, patched, monkeypatch):
    seen = {}
    real = trainer_mod.group_advantages

    def spy(rewards, valid, group_ids, method="entropic", fail_mode="floor"):
        seen.update(ids=list(group_ids), method=method, fail_mode=fail_mode)
        return real(rewards, valid, group_ids, method, fail_mode)

    monkeypatch.setattr(trainer_mod, "group_advantages", spy)
    tr = Trainer(cfg_for(tiny_dir, tmp_path, "g", states_per_step=2, rollouts_per_state=3), log=lambda *_: None)
    try:
        chosen = [s.id for s in tr.tree.select(2)]
        tr.step()
    finally:
        tr.close()
    assert seen["method"] == "entropic" and seen["fail_mode"] == "floor"
    assert seen["ids"] == [chosen[0]] * 3 + [chosen[1]] * 3


def test_start_grouped_advantages_rank_a_restart_only_against_restarts():
    restart = "    h, c = eb.multistart(24, clock.until(0.2), rng)\n    return eb.finish(h)\n```"
    parent = "    h, c = eb.refine(h, clock.until(0.9), 204)\n    return eb.finish(h)\n```"
    texts = [restart, restart, parent, parent]
    assert trainer_mod.advantage_groups(["s1"] * 4, texts) == ["s1"] * 4
    groups = trainer_mod.advantage_groups(["s1"] * 4, texts, "state_start")
    assert groups == ["s1|restart", "s1|restart", "s1|parent", "s1|parent"]
    rewards, valid = np.array([1.0, 2.0, 5.0, 6.0]), np.ones(4, dtype=bool)  # restarts worse than refinements
    by_state, _ = group_advantages(rewards, valid, ["s1"] * 4)
    by_start, _ = group_advantages(rewards, valid, groups)
    assert by_state[1] < 0  # the better restart is pushed down with the paper's groups
    assert by_start[1] > 0 and by_start[0] < 0 and by_start[3] > 0  # each start's better program is pushed up


def _warm_policy(cfg):
    """A policy whose adapter has moved away from the base model, as a warm start leaves it."""
    from ttlab.discover.llm.policy import LLMPolicy
    policy = LLMPolicy(cfg.policy, torch.device("cpu"), seed=0)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n, p in policy.model.named_parameters():
            if "lora_B" in n:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
    return policy


@pytest.mark.parametrize("ref, zero", [("init", True), ("base", False)])
def test_the_kl_reference_is_the_adapter_before_the_first_update_or_the_base_model(tiny_dir, tmp_path, patched,
                                                                                     ref, zero):
    cfg = cfg_for(tiny_dir, tmp_path, f"kl_{ref}", kl_coef=0.1, kl_ref=ref)
    tr = Trainer(cfg, policy=_warm_policy(cfg), log=lambda *_: None)
    try:
        warm = {n: p.detach().clone() for n, p in tr.policy.model.named_parameters() if p.requires_grad}
        m1 = tr.step()
        assert m1["learn/samples"] > 0
        # on the first step the policy is the reference itself (init) or far from it (base)
        assert (abs(float(m1["learn/kl"])) < 1e-6) == zero
        moved = {n: p.detach().clone() for n, p in tr.policy.model.named_parameters() if p.requires_grad}
        assert any(not torch.equal(moved[n], warm[n]) for n in warm)
        if ref == "init":
            with tr.policy.reference():  # the reference is the warm adapter, and the trained one comes back
                assert all(torch.equal(p, warm[n]) for n, p in tr.policy.model.named_parameters() if p.requires_grad)
            assert all(torch.equal(p, moved[n]) for n, p in tr.policy.model.named_parameters() if p.requires_grad)
            m2 = tr.step()
            assert abs(float(m2["learn/kl"])) > 1e-6  # after an update the policy has left its reference
    finally:
        tr.close()


def test_an_unknown_kl_reference_is_refused(tiny_dir, tmp_path, patched):
    with pytest.raises(ValueError, match="--kl-ref"):
        Trainer(cfg_for(tiny_dir, tmp_path, "badkl", kl_ref="warm"), log=lambda *_: None)


def test_an_unknown_advantage_group_is_refused(tiny_dir, tmp_path, patched):
    with pytest.raises(ValueError, match="--adv-group"):
        Trainer(cfg_for(tiny_dir, tmp_path, "bad", adv_group="start"), log=lambda *_: None)


def test_resume_restores_tree_optimizer_and_continues_exactly(tiny_dir, tmp_path, patched):
    quiet = lambda *_: None  # noqa: E731
    a = Trainer(cfg_for(tiny_dir, tmp_path, "full", steps=2), log=quiet)
    try:
        a.step()
        a.step()
    finally:
        a.close()
    ck1 = load_checkpoint(a.run.checkpoints / "step_000001")
    ck2 = load_checkpoint(a.run.checkpoints / "step_000002")

    b = Trainer(cfg_for(tiny_dir, tmp_path, "cut", steps=2), log=quiet)
    try:
        b.step()
    finally:
        b.close()
    c = Trainer(cfg_for(tiny_dir, tmp_path, "cut", steps=2, resume=True), log=quiet)
    try:
        assert c.step_idx == 1
        assert c.tree.to_json() == json.loads(ck1["tree"])
        opt = c.opt.state_dict()
        for k, st in ck1["optimizer"]["state"].items():
            for name in ("exp_avg", "exp_avg_sq"):
                assert torch.equal(opt["state"][k][name], st[name])
        c.step()
    finally:
        c.close()
    got = c.policy.adapter_state()
    for k, v in ck2["adapter"].items():
        assert torch.allclose(got[k], v, atol=1e-6), k
    assert c.tree.to_json() == json.loads(ck2["tree"])


def test_a_torn_checkpoint_is_never_loaded(tiny_dir, tmp_path, patched):
    quiet = lambda *_: None  # noqa: E731
    a = Trainer(cfg_for(tiny_dir, tmp_path, "torn", steps=1), log=quiet)
    try:
        a.step()
    finally:
        a.close()
    # a kill -9 during the next save: tensors written, metadata and LATEST not yet
    (a.run.checkpoints / "step_000002.safetensors").write_bytes(b"partial")
    b = Trainer(cfg_for(tiny_dir, tmp_path, "torn", steps=1, resume=True), log=quiet)
    try:
        assert b.step_idx == 1
        assert np.isfinite(b.tree.best().reward)
    finally:
        b.close()


def test_frozen_arm_samples_and_verifies_but_never_updates(tiny_dir, tmp_path, patched):
    tr = Trainer(cfg_for(tiny_dir, tmp_path, "fz", frozen=True), log=lambda *_: None)
    try:
        before = tr.policy.adapter_state()
        m = tr.step()
        after = tr.policy.adapter_state()
    finally:
        tr.close()
    assert m["rollout/valid_rate"] > 0 and m["learn/samples"] == 0
    assert all(torch.equal(before[k], after[k]) for k in before)
    for k in ("rollout/parse_rate", "tree/best_score", "rollout/completion_tokens_mean"):
        assert k in m


def test_advantages_are_clipped_at_the_call_site(tiny_dir, tmp_path, patched, monkeypatch):
    """--adv-clip (off by default: the estimator is bounded) still clips whatever the estimator returns."""
    seen = {}
    real = trainer_mod.learn

    def huge(rewards, valid, group_ids, method="entropic", fail_mode="floor"):
        return np.where(valid, 1e13, -1.0), np.ones(len(group_ids), dtype=bool)

    def spy(policy, opt, gens, adv, keep, cfg):
        seen["adv"] = adv.copy()
        return real(policy, opt, gens, adv, keep, cfg)

    monkeypatch.setattr(trainer_mod, "group_advantages", huge)
    monkeypatch.setattr(trainer_mod, "learn", spy)
    tr = Trainer(cfg_for(tiny_dir, tmp_path, "clip", adv_clip=5.0), log=lambda *_: None)
    try:
        m = tr.step()
    finally:
        tr.close()
    assert np.abs(seen["adv"]).max() <= 5.0 and m["adv/abs_max_raw"] == pytest.approx(1e13)


def test_init_tree_starts_a_new_run_from_an_earlier_runs_verified_states(tiny_dir, tmp_path, patched):
    """--init-tree: a fresh run starts from another run's tree (its children included, rewards re-verified);
    a tampered reward or a missing file is refused with the flag's name."""
    first = Trainer(cfg_for(tiny_dir, tmp_path, "boot", frozen=True), log=lambda *_: None)
    try:
        first.step()
    finally:
        first.close()
    path = first.run.file("tree.json")
    src = json.loads(path.read_text())
    assert any(n["parent_id"] for n in src["nodes"])  # the bootstrap added children
    tr = Trainer(cfg_for(tiny_dir, tmp_path, "from_boot", init_tree=str(path)), log=lambda *_: None)
    try:
        assert sorted(tr.tree.nodes) == sorted(n["id"] for n in src["nodes"])
        assert tr.tree.best().score == pytest.approx(first.tree.best().score)
        m = tr.step()
        assert m["tree/size"] >= 1 and tr.step_idx == 1
    finally:
        tr.close()
    src["nodes"][-1]["reward"] += 1.0
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(src))
    with pytest.raises(ValueError, match="--init-tree .*verifies"):
        Trainer(cfg_for(tiny_dir, tmp_path, "bad", init_tree=str(bad)), log=lambda *_: None)
    with pytest.raises(FileNotFoundError, match="--init-tree"):
        Trainer(cfg_for(tiny_dir, tmp_path, "missing", init_tree=str(tmp_path / "nope.json")), log=lambda *_: None)


def test_update_probe_sees_rewarded_completions_gain_log_prob(tiny_dir, tmp_path, patched):
    """--probe-update: after the step, completions with positive advantage gained log-prob relative to the
    others (the first Adam step descends the loss); frozen runs never probe."""
    tr = Trainer(cfg_for(tiny_dir, tmp_path, "probe", probe_update=True, lr=1e-3), log=lambda *_: None)
    try:
        m = tr.step()
    finally:
        tr.close()
    assert m["learn/samples"] > 0
    assert np.isfinite(m["learn/dlogp_pos"]) and np.isfinite(m["learn/dlogp_neg"])
    assert m["learn/dlogp_pos"] > m["learn/dlogp_neg"]
    assert m["learn/dlogp_pos"] > 0


@pytest.mark.skipif(shared_data_file("erdos_reference.json", required=False) is None,
                    reason="the published constructions (shared data) are what a copy copies")
def test_every_rollout_records_its_program_and_parent_and_a_copy_earns_nothing(tiny_dir, tmp_path, monkeypatch):
    """A third of the completions return a construction the task already knows (a refined, reversed copy of the
    published record, or of the tree's first root when the reference data is absent): each is logged as a copy,
    counts as a failed sample and never becomes a state."""
    from ttlab.discover.provenance import program_hash
    from ttlab.discover.tasks.erdos import load_reference, reference_file

    tr = Trainer(cfg_for(tiny_dir, tmp_path, "p", states_per_step=2, rollouts_per_state=6), log=lambda *_: None)
    ref = reference_file()
    copied = load_reference(ref)[-1]["h"] if ref else tr.tree.nodes["s0"].array()
    copy = ("import numpy as np\nH = np.array(" + repr([float(x) for x in np.repeat(copied[::-1], 2)]) + ")\n"
            "def solve(parent, budget_s, seed):\n    return H\n")
    monkeypatch.setattr(trainer_mod, "extract_code",
                        lambda text: copy if len(text.encode("utf-8", "replace")) % 3 == 0 else fake_extract(text))
    try:
        chosen = {s.id for s in tr.tree.select(2)}
        m = tr.step()
    finally:
        tr.close()
    lines = [json.loads(x) for x in (tr.run.path / "samples.jsonl").read_text().splitlines()]
    assert len(lines) == 12 and all(x["parent"] == x["state"] in chosen and len(x["program"]) == 16 for x in lines)
    copies = [x for x in lines if x["program"] == program_hash(copy)]
    if not ref:  # the root's own rollouts rediscover it (same lineage); the other state's copy it
        copies = [x for x in copies if x["state"] != "s0"]
    assert copies and all(x["verdict"] == "copy" and x["valid"] and not x["counted"] for x in copies)
    assert m["rollout/copy_rate"] == pytest.approx(len(copies) / 12)
    assert all(n.program != program_hash(copy) for n in tr.tree.nodes.values())


def test_block_programs_run_in_the_trainer_with_the_blocks_bundled_and_beta_caps_are_logged(tiny_dir, tmp_path,
                                                                                          monkeypatch):
    """A completion that imports `erdos_blocks` runs in the sandbox (the trainer bundles the module), and the
    tree stores the program as written (unbundled)."""
    from ttlab.discover.random_blocks import random_program

    progs = [random_program(np.random.default_rng(k))[0] for k in range(3)]
    monkeypatch.setattr(trainer_mod, "extract_code", lambda text: progs[len(text) % 3])
    tr = Trainer(cfg_for(tiny_dir, tmp_path, "blocks", states_per_step=1, rollouts_per_state=3,
                         prompt_format="blocks"), log=lambda *_: None)
    try:
        m = tr.step()
    finally:
        tr.close()
    assert m["rollout/valid_rate"] > 0
    assert 0.0 <= m["adv/beta_at_cap_frac"] <= 1.0 or m["adv/beta_at_cap_frac"] != m["adv/beta_at_cap_frac"]
    kids = [n for n in tr.tree.nodes.values() if n.parent_id]
    assert kids and all(n.code.startswith("import numpy as np\nimport erdos_blocks as eb") for n in kids)


def test_the_learn_phase_runs_on_its_own_thread_count_and_the_rest_of_the_step_does_not(tiny_dir, tmp_path, patched,
                                                                                         monkeypatch):
    seen = {}
    real = trainer_mod.learn

    def spy(policy, opt, gens, adv, keep, cfg):
        seen["learn"] = torch.get_num_threads()
        return real(policy, opt, gens, adv, keep, cfg)

    monkeypatch.setattr(trainer_mod, "learn", spy)
    tr = Trainer(cfg_for(tiny_dir, tmp_path, "lt", threads=1, learn_threads=2), log=lambda *_: None)
    try:
        tr.step()
        after = torch.get_num_threads()
    finally:
        tr.close()
    assert seen["learn"] == 2 and after == 1
