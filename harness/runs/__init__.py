"""Runs of the suite as the verbs start them: the request a run is given, a child `./lab run`
and its report folder read back, the folder a verb writes its reports to."""
