"""A known kernel issue as a maintainer reads it (`./lab report`): the mail's text, the code
it quotes from the tree, and the reproducer built and run on the lab's kernels."""
