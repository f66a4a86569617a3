"""What a run serves its agent on loopback: the tool server (harness/serving/tools.py) that answers an in-app agent's
tool calls with the task's scripted results or tool environment, and later the model proxy. Each has one lifecycle:
started once for the run, a path of its own for each trial (a new one for each turn of a conversation), and shut down
with the run. Imported only by a run that serves its agent something."""
