"""PyTorch Inductor stage: read what torch.compile wrote, as XLA's HLO stage reads its dumps.

Pure readers (no torch import): `trace_log` reads the TORCH_TRACE log (compiles, graph
breaks, recompiles, guards, compile-time phases), `artifacts` reads Inductor's debug folder
into one `InductorGraph` per compiled graph, and `clusters` turns a graph into the harness's
clusters and fusions.json reverse map.
"""
