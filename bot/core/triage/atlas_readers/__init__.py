"""How bot.core.triage.atlas_findings reads one problem line: which lines it weighs, how a line the atlas placed
becomes a finding, and the readers for lines whose message the atlas alone cannot explain (argparse's refusals,
the weight loader's KeyError, an attention backend ruled out earlier, a GPU too old, …).

atlas_findings is the entry point; nothing here imports it back.
"""
