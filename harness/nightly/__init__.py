"""`./lab nightly`: the matrix of cells, a cell run as a RunRequest, the Dask cluster, the night's report."""
