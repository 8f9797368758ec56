"""The differential diagnosis: every known issue is a hypothesis weighed against the evidence.

A hypothesis has premises (the vLLM version range it affects, the method, facts about the drafter)
and an expected signature in the acceptance curve (bot/core/triage/acceptance.py). Each premise is
known (`yes`/`no`, from a flag, the log or the knowledge base), only guessed (a version read off the
`[metrics.py:LINE]` hint, a method read off a drafter's name) or unknown. The rule:

- a premise that is known false          -> not-applicable
- the signature is there                 -> fits (high confidence when every premise is known)
- no acceptance data to compare with     -> fits when every premise is known, else possible
- the evidence contradicts the signature -> possible (known premises: a note, not a problem), else ruled-out

So a finding about a bug needs its signature (or a log line that says so) whenever a premise is only
guessed, and acceptance that contradicts it rules it out. Tuning advice (fewer tokens) is never given
on top of a bug: fix first, then tune. The words and facts come from known_issues.yaml and the
knowledge base (bot/core/knowledge/); the code decides when they apply and how sure it is.

One module per kind of detector: upstream_bugs.py (bugs of a release or of the drafter's wiring),
low_acceptance.py (a pairing or a drafter below its method's typical acceptance), speculative_tokens.py
(a smaller k), throughput.py (speculation that does not pay), serving.py (the server down, its KV cache
full, a drafter under load), log_lines.py (a line the knowledge base knows) and outcome.py (no metrics, or
healthy). They share state.py (what they read and what they return), premises.py (the rule above) and
common.py. The order they run in is bot/core/triage/differential.py's, and only there.
"""
