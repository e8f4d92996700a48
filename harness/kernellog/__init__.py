"""Reading a kernel's log offline: console text and dmesg records in, boot stages, panics, splats
and their decoded frames out. Pure readers of text (and, to decode, the built tree's own script):
nothing here starts, reaches or waits for a guest, so a saved log is read the same as a live one.
"""
