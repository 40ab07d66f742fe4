"""How many examples a property test draws: its own count in the full suite (CI), a few in the fast tier.

`scripts/test --fast` sets HIVE_TEST_TIER=fast; the full suite never does, so it keeps every example.
"""

import os

FAST_TIER_EXAMPLES = 20  # enough to exercise each strategy's shapes in the quick tier; CI draws the full count


def examples(full: int) -> int:
    """`full` in the full suite; at most FAST_TIER_EXAMPLES when scripts/test --fast runs the quick tier."""
    if os.environ.get("HIVE_TEST_TIER") == "fast":
        return min(full, FAST_TIER_EXAMPLES)
    return full
