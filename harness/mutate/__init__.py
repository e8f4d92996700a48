"""`./lab mutate`: the catalog's mutants built and judged by the suite."""
