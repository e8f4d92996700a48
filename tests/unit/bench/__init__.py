"""Tests of harness/bench/, one file a module (a package: its file names repeat others')."""
