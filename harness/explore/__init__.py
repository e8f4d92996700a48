"""`./lab explore`: random sequences of ordinary calls on the ring-buffer paths, checked
against the ABI's model after every step (the model and the calls are in
probes/explore_*.py; the guest runs them), every failure shrunk, confirmed on a fresh guest,
bound to a known issue or called new, and written out with reproducers."""
