"""Issue 26's floors over the whole corpus, from `make corpus`'s rows
(benchmarks/corpus_report.py prints and writes which hold): the share of calls on
graphs, programs without graph breaks, speed against imperative, first calls and
peak memory; and programs that were not correct or could not be timed (their
rows say why). Not a pass/fail test: speed is timed, and the suite asserts what must
always hold (every program correct, no program worse than its expected file,
every program under half on graphs saying why: tests/test_corpus.py)."""
import statistics


def misses(rows):
    """The floors `rows` (corpus_report's, one per program) miss, in words."""
    correct = [row for row in rows if row["correct"]]
    found = ["%s is not correct: %s" % (row["name"], row["wrong"])
             for row in rows if not row["correct"]]
    found += ["%s, %s: not timed (%s)" % (row["name"], kind, why)
              for row in rows for kind, why in sorted(row["not_timed"].items())]
    share = statistics.mean(row["share_on_graphs"] or 0 for row in correct) if correct else 0
    if share < 0.9:
        found.append("%.0f%% of calls after profiling on graphs (mean over programs), floor 90%%"
                     % (100 * share))
    unbroken = [row for row in correct if row["status"] == "graphs" and not row["graph_breaks"]]
    if len(unbroken) < 0.7 * len(correct):
        found.append("%d of %d working programs on graphs with no graph break, floor 70%%"
                     % (len(unbroken), len(correct)))
    for kind, floor in (("inference", 1.5), ("training", 1.3)):
        speeds = {row["name"]: row["speed"][kind] for row in rows
                  if row["speed"].get(kind) is not None}
        slow = sorted(name for name, speed in speeds.items() if speed < 0.95)
        if slow:
            found.append("%s speed under 0.95x imperative: %s" % (kind, ", ".join(slow)))
        if speeds and statistics.median(speeds.values()) < floor:
            found.append("median %s speed %.2fx, floor %.1fx"
                         % (kind, statistics.median(speeds.values()), floor))
    tree = [row for row in rows if row["name"] == "tree_lstm_similarity"]
    if not tree or (tree[0]["speed"].get("inference") or 0) < 4:
        found.append("the child-sum Tree-LSTM on new trees: %s, floor 4x"
                     % (tree[0]["speed"] if tree else "not measured"))
    for row in rows:
        if row["first_call_s"] is not None and row["first_call_s"] > 120:
            found.append("%s: first calls take %.0f s, limit 120 s"
                         % (row["name"], row["first_call_s"]))
        if row["peak_memory"] is not None and row["peak_memory"] > 1.1:
            found.append("%s: peak memory %.2fx imperative, limit 1.1x"
                         % (row["name"], row["peak_memory"]))
    return found
