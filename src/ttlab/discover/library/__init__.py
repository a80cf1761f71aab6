"""Library of real optimiser programs run by the offline `LibraryProposer` (files `<task>_<name>.py`).

Each file is a complete sandbox program defining `solve(parent, budget_s, seed)`, with a one-line
`SETTINGS = {...}` that the proposer mutates per proposal.
"""

import ttlab.discover.blocks  # noqa: F401,E402  registers `erdos_blocks`, which the Erdős programs import
