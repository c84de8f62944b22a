"""The Locust engine: an open-model load on TokenClient, from one host or many.

``schedule``: when each request should start (constant spacing or Poisson
arrivals), shared out among the workers. ``samples``: the actions a sample
(one record per request: intended start, send, answer) names and the Rally
scenario of each ``--scenario``; the Rally JSON report built from the
samples is report/locust_report.py's. ``setup``: the users, projects and
tokens made before the load and deleted after it. ``locustfile``: what
``locust -f`` loads, a thin entry to its parts: ``custom_args`` (the
``--ks-*`` options), ``master`` (and ``master_files``, what it writes: the
raw samples and run.json) and ``worker`` (and the user that sends).
``engine``: starts a master and K workers for ``keystone-bench load`` and
``capacity --engine locust``, and builds the report from what the master
wrote once it exited.

Nothing here imports gevent or Locust at import time except ``locustfile``
and its parts ``master`` and ``worker``.
"""
