"""What a run serves its agent on loopback: the tool server (harness/serving/tools.py) that answers an in-app agent's
tool calls with the task's scripted results or tool environment, and the model proxy (harness/serving/models.py) that
forwards its model calls upstream and records them. Each has one lifecycle, the same (harness/serving/listener.py):
started once for the run, a path of its own for each trial (the tool server's, a new one for each turn of a
conversation), and shut down with the run. Imported only by a run that serves its agent something."""
