"""The strategies a research run can take, by name (`ResearchConfig.strategy`).

The program looks its strategy up here and asks it for what differs (its stages, its planned nodes, its
research, the reasons it prunes nodes for), so it names none of them.
"""

from __future__ import annotations

from deepresearch.programs.research.eco import Eco
from deepresearch.programs.research.gather import Gather
from deepresearch.programs.research.hero import Hero
from deepresearch.programs.research.parallel import Parallel
from deepresearch.programs.research.strategy import Strategy

STRATEGIES: dict[str, Strategy] = {s.name: s for s in (Eco(), Hero(), Parallel(), Gather())}
