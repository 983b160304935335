"""The skeletons `dlstudio exercise NAME DIR` copies: the contract in the docstring, the bodies
raising NotImplementedError, and (where the part is a nested class) a container that trains
it with --model-class."""
