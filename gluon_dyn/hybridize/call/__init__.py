"""The call path of a dynamic block, as stages: cache_key.py (what a call is keyed
on), then capturing/ (tracing it), then executor.py (running the graph, checking its
guards, writing state back), with runner.py the policy between them (profile,
speculate, give up, split at graph breaks, speed check); segments.py runs a forward
split at graph breaks, served.py counts how calls were served, methods.py gives other
methods runners of their own, dynamic.py installs the runner in `hybridize`.

The top of hybridize/: imports point down to capturing/, conversion/, passes/,
partition/, timing/ and recursion/; none of them imports this package.
"""
