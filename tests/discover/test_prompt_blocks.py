"""The blocks prompt format: the API section, its answer prefix, and the other formats left as they were."""
import numpy as np
import pytest

from ttlab.discover.blocks import with_blocks
from ttlab.discover.prompts import (
    ANSWER_PREFIXES,
    BLOCKS_API,
    PROMPT_FORMATS,
    PromptState,
    blocks_root_program,
    extract_code,
)
from ttlab.discover.tasks import get_task


def test_blocks_prompt_documents_the_api_and_its_answer_prefix_completes_to_a_runnable_program():
    task = get_task("erdos")
    p = PROMPT_FORMATS["blocks"](task, PromptState(score=0.39))
    for name in ["eb.Clock", "eb.multistart", "eb.hop", "eb.refine", "eb.finish", "eb.lp_polish", "eb.coarsen"]:
        assert name in BLOCKS_API and name in p
    assert "score 0.39" in p and "return eb.finish(h)" in p  # the root program shown
    reply = "    h, c, hops = eb.hop(h, clock.until(0.5), rng)\n    return eb.finish(h)\n```"
    code = extract_code(ANSWER_PREFIXES["blocks"](task) + reply)
    g: dict = {}
    exec(compile(with_blocks(code), "program", "exec"), g)
    x0 = task.initial_states(np.random.default_rng(0), 1)[0]
    out = g["solve"](x0, 1.0, 0)
    assert task.verify(out).valid and task.verify(out).score < task.verify(x0).score
    assert blocks_root_program(task) in with_blocks(blocks_root_program(task))
    with pytest.raises(ValueError, match="erdos"):
        PROMPT_FORMATS["blocks"](get_task("ac1"), PromptState())
    assert PROMPT_FORMATS["compact"](task, PromptState()).count("eb.") == 0  # the other formats are unchanged
