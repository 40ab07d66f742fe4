"""JSON texts the daemons write (answers, records, todo lines, progress events, the transcript index), by encoders
built once.

`json.dumps` given any option off its defaults (separators, ensure_ascii, allow_nan) builds a new `JSONEncoder`
at every call; a `run` writes five to seven JSON texts (its answer, two records, its todo and the outbox's line).
`JSONEncoder.encode` keeps nothing between calls (each call makes its own markers for circular references), so
one encoder serves every thread.
"""

from __future__ import annotations

import json

compact = json.JSONEncoder(separators=(",", ":")).encode  # ASCII, no spaces: answers and records
# The harness's lines: UTF-8 (the wire encodes it), and nothing JSON does not define.
compact_utf8 = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
strict = json.JSONEncoder(allow_nan=False).encode  # refuses NaN and infinities (not JSON) with a ValueError
utf8_line = json.JSONEncoder(ensure_ascii=False).encode  # the outbox's lines
