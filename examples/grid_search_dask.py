"""
Grid search over beta on a dask cluster
=======================================

Grid search over NG-EBM's beta on a dask cluster (here a local one: 2 worker processes).

Run: python examples/grid_search_dask.py   (needs pip install "ebmclassifier[distributed]")

Against a real cluster, replace the LocalCluster by Client("tcp://scheduler:8786").
"""

import joblib
from dask.distributed import Client, LocalCluster
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ebmclassifier import NGEBMClassifier

if __name__ == "__main__":  # the worker processes are spawned and import this file
    X, y = load_digits(return_X_y=True)
    model = make_pipeline(StandardScaler(), NGEBMClassifier(max_epochs=5, random_state=0))
    grid = {"ngebmclassifier__beta": [0.0, 0.25, 0.5, 0.75]}
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster),
        joblib.parallel_backend("dask"),
    ):
        search = GridSearchCV(model, grid, cv=3, n_jobs=-1).fit(X, y)
    print(search.best_params_, round(search.best_score_, 3))
