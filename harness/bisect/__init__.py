"""`./lab bisect` and `./lab bisect-step`: git bisect driven by the suite, a step judged from its child run."""
