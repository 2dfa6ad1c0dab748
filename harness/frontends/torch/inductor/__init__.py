"""PyTorch Inductor stage: read what torch.compile wrote, as XLA's HLO stage reads its dumps.

Pure readers (no torch import): `trace_log` reads the TORCH_TRACE log (compiles, graph
breaks, recompiles, guards, compile-time phases), `artifacts` reads Inductor's debug folder
into one `InductorGraph` per compiled graph, `clusters` turns a graph into the harness's
clusters and fusions.json reverse map, `captured` splits a variant's graphs by call (first,
new shape) and fingerprints them, and `diverge` finds where two torch ladders first differ.
"""
