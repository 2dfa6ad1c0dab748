"""PyTorch Inductor stage: read torch.compile's debug artifacts and TORCH_TRACE logs.

Pure readers (no torch import): `artifacts` parses the files Inductor and Dynamo wrote,
`clusters` turns one compiled graph into the harness's clusters and reverse map.
"""
