"""The codec's instruction-count guard (callgrind): see callgrind.py."""
